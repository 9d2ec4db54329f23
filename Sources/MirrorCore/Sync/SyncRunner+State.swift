import MirrorFS
import MirrorKit
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

extension SyncRunner {
    /// Takes DEST's one lock first (``DestinationLock``, found from what DEST is, whatever its
    /// spelling, mode or stage of conversion), then opens what the run works in: DEST (for an
    /// atomic DEST, the building folder of its ``GenerationStore``), the state folder and its
    /// partial folder (both owned by this user, SECURITY.md), the journal (compacted when due)
    /// and the installer. Nothing is opened before the lock, so a run that waited for it
    /// (`--wait`) sees what the run before it left, not what was there when it started waiting.
    /// Returns the lock and, for an atomic DEST, the set it shows now (nil for a plain DEST).
    ///
    /// A DEST whose store holds its state is atomic whatever the options say: a conversion that
    /// a kill interrupted is finished by the next run, plain or not, with its journal, partial
    /// downloads and `building/` (docs/cli.md, "Atomic destinations").
    func openState(_ destPath: String) throws -> (DestinationLock, Destination?) {
        let identity = try DestinationIdentity.resolve(destPath)
        guard let lock = try DestinationLock.take(identity, creating: options.atomic ? .store : .plain,
                                                  wait: options.waitForLock, shouldStop: { StopSignal.received != 0 }) else {
            throw SystemError("create", identity.displayPath + "/" + Destination.stateFolderName, code: ENOENT)
        }
        do {
            var current = try openDestination(destPath, identity: identity, lock: lock)
            guard let state = try destination.stateFolder(create: true),
                  let partials = try destination.stateFolder("partial", create: true) else {
                throw SystemError("create", destination.displayState(Destination.stateFolderName), code: ENOENT)
            }
            // Nobody else may have written what the run is about to trust (SECURITY.md).
            try StateOwnership.require(state, destination.displayState(Destination.stateFolderName))
            try StateOwnership.require(partials, destination.displayState(".mirror/partial"))
            partialFolder = partials
            partialNaming = PartialNaming(canLinkOpenFiles: PartialFile.canLinkUnnamedFiles(in: partials))
            writer = JournalWriter(try Journal(folder: state, displayPath: destination.displayState(".mirror/journal"), readOnly: false))
            if journal.needsCompaction(liveEntries: manifest.entries.count) { try compactJournal() }
            if let store = generations, let plain = current, try keepPlainSet(plain, in: store) {
                current = try Destination.openExisting(identity)
                destination = try Destination.building(store)
            }
            installer = Installer(destination: destination, partialFolder: partials, writer: writer)
            keptGenerations = generations.map { keptSets(of: $0) } ?? []
            contentIndex = ContentIndex(journal: journal, destinations: [destination] + (current.map { [$0] } ?? []) + keptGenerations,
                                        seeds: options.seeds)
            localTrees = [destination] + (current.map { [$0] } ?? [])
            return (lock, current)
        } catch {
            lock.release()
            throw error
        }
    }

    /// Opens the folder the run installs into, under the lock: for an atomic DEST (or one
    /// becoming so) the store's building folder, after a plain DEST's `.mirror` moved into the
    /// store (``DestinationLock/moveState(into:)``: the journal, partial downloads and kept
    /// manifest copy carry over, so turning a DEST atomic costs no download). Returns the set
    /// DEST shows now, for an atomic DEST.
    private func openDestination(_ destPath: String, identity: DestinationIdentity, lock: DestinationLock) throws -> Destination? {
        guard options.atomic || lock.stateIsInStore else {
            destination = try Destination.create(destPath)
            return nil
        }
        guard let store = try GenerationStore.open(identity, create: true) else {
            throw SystemError("open folder", identity.storePath, code: ENOENT)
        }
        try store.requireOwnership()
        generations = store
        try lock.moveState(into: store.store)
        let current = try Destination.openExisting(identity)
        destination = try Destination.building(store)
        return current
    }
}
