import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// Where a run works, opened once it holds DEST's one lock, and fixed for the rest of the run:
/// the folder it installs into (DEST, or an atomic DEST's `building/`), the state folder's
/// partial folder, the journal's one writer, the generation store of an atomic DEST, and what
/// is made from them (the installer, the index of local copies). The run's setup, apart from the
/// loop that uses it (``SyncRunner``).
final class RunPlace {
    /// DEST's one lock (``DestinationLock``), released by the run when it ends.
    let lock: DestinationLock
    /// The folder the run installs into: DEST, or for an atomic DEST its building folder.
    let destination: Destination
    let partialFolder: FileDescriptor
    /// Whether small downloads go without a name this run (``PartialNaming``), asked once the
    /// partial folder is open and locked.
    let partialNaming: PartialNaming
    /// The one writer of DEST's journal (``JournalWriter``).
    let writer: JournalWriter
    /// The journal the writer writes, for lookups.
    var journal: Journal { writer.journal }
    /// The generation store when DEST is atomic (``GenerationStore``); the run then installs into
    /// its building folder and publishes it at the end.
    let generations: GenerationStore?
    /// The set an atomic DEST shows now (nil for a plain DEST, or an atomic one not made yet).
    let current: Destination?
    /// The complete generations of an atomic DEST other than the one it shows, newest first:
    /// sources of unchanged files and of reuse by content.
    let keptGenerations: [Destination]
    let installer: Installer
    /// Files on this machine that may hold an entry's bytes (renamed, duplicated, `--seed`).
    let contentIndex: ContentIndex
    /// The sources whose file an earlier run refused (``RefusedBook``); sync thread only.
    let refused: RefusedBook
    /// The state folder (`.mirror`), where the refusals are kept.
    let stateFolder: FileDescriptor
    /// Where an older version of an entry may be found for a chunk delta: DEST, and the current
    /// generation of an atomic DEST.
    var localTrees: [Destination] { [destination] + (current.map { [$0] } ?? []) }

    private init(lock: DestinationLock, destination: Destination, partialFolder: FileDescriptor, partialNaming: PartialNaming,
                 writer: JournalWriter, generations: GenerationStore?, current: Destination?, keptGenerations: [Destination],
                 seeds: [String], state: FileDescriptor, refused: [RefusedSource]) {
        self.lock = lock
        self.destination = destination
        self.partialFolder = partialFolder
        self.partialNaming = partialNaming
        self.writer = writer
        self.generations = generations
        self.current = current
        self.keptGenerations = keptGenerations
        stateFolder = state
        self.refused = RefusedBook(refused)
        installer = Installer(destination: destination, partialFolder: partialFolder, writer: writer)
        contentIndex = ContentIndex(journal: writer.journal,
                                    destinations: [destination] + (current.map { [$0] } ?? []) + keptGenerations, seeds: seeds)
    }

    /// Takes DEST's one lock first (``DestinationLock``, found from what DEST is, whatever its
    /// spelling, mode or stage of conversion), then opens what the run works in: DEST (for an
    /// atomic DEST, the building folder of its ``GenerationStore``), the state folder and its
    /// partial folder (both owned by this user, SECURITY.md), the journal (compacted when due)
    /// and the installer. Nothing is opened before the lock, so a run that waited for it
    /// (`--wait`) sees what the run before it left, not what was there when it started waiting.
    ///
    /// A DEST whose store holds its state is atomic whatever the options say: a conversion that
    /// a kill interrupted is finished by the next run, plain or not, with its journal, partial
    /// downloads and `building/` (docs/cli.md, "Atomic destinations").
    ///
    /// `early`: the lock and the journal taken while the manifest was read (``EarlyPlace``), used
    /// instead of taking and reading them again.
    static func open(_ destPath: String, manifest: Manifest, options: SyncOptions, report: ConsoleReport,
                     early: EarlyPlace? = nil) throws -> RunPlace {
        let identity = try early?.identity ?? DestinationIdentity.resolve(destPath)
        guard let lock = try early?.lock ?? DestinationLock.take(identity, creating: options.atomic ? .store : .plain,
                                                                 wait: options.waitForLock, shouldStop: { StopSignal.received != 0 }) else {
            throw SystemError("create", identity.displayPath + "/" + Destination.stateFolderName, code: ENOENT)
        }
        do {
            // A signed manifest is held to the serial DEST accepted last, first of all: a refusal
            // changes nothing under DEST (docs/signing.md, "Versions").
            if let sha256 = options.signedManifestSHA256, let state = lock.stateFolder {
                try SerialGate.admit(manifest, sha256: sha256, state: state, record: false)
            }
            // A plain DEST about to become atomic: refused, with nothing moved, when the switch
            // would drop a file mirror did not install (``ConversionCheck``).
            if options.atomic || lock.stateIsInStore, ConversionCheck.isDue(identity) {
                try ConversionCheck.require(destPath, state: lock.stateFolder, manifest: manifest, options: options)
            }
            // Recorded once nothing can refuse the run any more, still before any request: a
            // refused conversion leaves DEST as it was, its serial record included.
            if let sha256 = options.signedManifestSHA256, let state = lock.stateFolder {
                try SerialGate.admit(manifest, sha256: sha256, state: state, record: true)
            }
            var (destination, generations, current) = try openDestination(destPath, identity: identity, lock: lock, options: options)
            guard let state = try destination.stateFolder(create: true),
                  let partials = try destination.stateFolder("partial", create: true) else {
                throw SystemError("create", destination.displayState(Destination.stateFolderName), code: ENOENT)
            }
            // Nobody else may have written what the run is about to trust (SECURITY.md).
            try StateOwnership.require(state, destination.displayState(Destination.stateFolderName))
            try StateOwnership.require(partials, destination.displayState(".mirror/partial"))
            let naming = PartialNaming(canLinkOpenFiles: PartialFile.canLinkUnnamedFiles(in: partials))
            let journal = try early?.journal(for: state)
                ?? Journal(folder: state, displayPath: destination.displayState(".mirror/journal"), readOnly: false)
            let writer = JournalWriter(journal)
            if writer.journal.needsCompaction(liveEntries: manifest.entries.count) { try compactJournal(writer, for: manifest) }
            if let store = generations, let plain = current,
               try keepPlainSet(plain, in: store, building: destination, manifest: manifest, writer: writer, report: report) {
                current = try Destination.openExisting(identity)
                destination = try Destination.building(store)
            }
            return RunPlace(lock: lock, destination: destination, partialFolder: partials, partialNaming: naming, writer: writer,
                            generations: generations, current: current,
                            keptGenerations: generations.map { keptSets(of: $0) } ?? [], seeds: options.seeds,
                            state: state, refused: try RefusedSources.read(in: state))
        } catch {
            // A journal read begun while the manifest was read ends before the lock goes: it may
            // cut a torn tail, which only the lock's holder may do.
            early?.waitForRead()
            lock.release()
            throw error
        }
    }

    /// Compacts the journal for `manifest` (docs/journal.md, "Compaction"), asking for the
    /// manifest's paths through its compact path table (``PathIndex/init(listing:)``, 8 bytes a
    /// slot), not sets of identities and paths (about 300 MB at 10^6 entries).
    static func compactJournal(_ writer: JournalWriter, for manifest: Manifest) throws {
        let entries = manifest.entries
        let listing = PathIndex(listing: entries)
        try writer.compact(current: { path in listing.entryIndex(path).map { entries[$0] } })
    }

    /// Opens the folder the run installs into, under the lock: for an atomic DEST (or one
    /// becoming so) the store's building folder, after a plain DEST's `.mirror` moved into the
    /// store (``DestinationLock/moveState(into:)``: the journal, partial downloads and kept
    /// manifest copy carry over, so turning a DEST atomic costs no download). Returns it with the
    /// store and the set DEST shows now, for an atomic DEST.
    private static func openDestination(_ destPath: String, identity: DestinationIdentity, lock: DestinationLock,
                                        options: SyncOptions) throws -> (Destination, GenerationStore?, Destination?) {
        guard options.atomic || lock.stateIsInStore else {
            return (try Destination.create(destPath), nil, nil)
        }
        guard let store = try GenerationStore.open(identity, create: true) else {
            throw SystemError("open folder", identity.storePath, code: ENOENT)
        }
        try store.requireOwnership()
        try lock.moveState(into: store.store)
        let current = try Destination.openExisting(identity)
        return (try Destination.building(store), store, current)
    }

    /// The complete generations but the one DEST shows, newest first, opened for reading; one
    /// that cannot be opened is left out (it is only a source).
    private static func keptSets(of store: GenerationStore) -> [Destination] {
        var shown: Int?
        if case .generation(let n) = store.current() { shown = n }
        let numbers = ((try? store.generations()) ?? []).filter { $0 != shown }.reversed()
        return numbers.compactMap { try? Destination.keptGeneration(store, $0) }
    }

    /// The first atomic run on a plain DEST keeps the set DEST showed as a generation of its own
    /// (g1), so that `rollback` can go back to it: the plain folder itself becomes generation 1
    /// (``GenerationStore/adoptPlainFolder()``: one exchange of names, no link made, no file's
    /// status moved); the run then builds the manifest's set as the next one. Only a set worth
    /// going back to is kept: the last run ended `ok` and the journal vouches for every file in
    /// the folder (nothing of the user's, nothing half-updated). A conversion that a kill
    /// interrupted (files in `building/` already) goes on as it was. True when DEST now shows the
    /// kept set.
    private static func keepPlainSet(_ plain: Destination, in store: GenerationStore, building destination: Destination,
                                     manifest: Manifest, writer: JournalWriter, report: ConsoleReport) throws -> Bool {
        let journal = writer.journal
        // The last run ended ok and nothing ran after it: a run killed after it may have installed
        // or removed files of another version, each verified on its own, which are no version's set.
        try store.removeAdoptionLeftover()
        guard case .plainFolder = store.current(), journal.lastRun?.succeeded == true, journal.recordsSinceLastRun == 0,
              try store.generations().isEmpty,
              try destination.walk(skippingTopLevel: "").files.isEmpty else { return false }
        // One walk of the plain folder (a top-level folder per thread, ``SetWalk``) that checks
        // the journal vouches for every file: the manifest's entries by the no-op path, another
        // version's files by their decoded record.
        struct Part: Sendable {
            var whole = true
            var files = 0
        }
        let entries = manifest.entries
        let listed = PathIndex(listing: entries)
        let parts = try SetWalk(set: plain).walk({ Part() }) { file, part in
            guard part.whole else { return }
            if let index = file.path.withUnsafeBufferPointer({ listed.entryIndex($0) }),
               journal.isVerified(entries[index], status: file.status) {
                part.files += 1
                return
            }
            guard let path = String(validating: file.path, as: UTF8.self), let record = journal.records(for: path)?.verified,
                  record.matches(file.status) else { part.whole = false; return }
            part.files += 1
        }
        // A file the journal does not vouch for: the set is no version's, so it is not kept; the
        // run converts as before, in one generation.
        guard parts.allSatisfy(\.whole), parts.contains(where: { $0.files > 0 }) else { return false }
        // The folder itself becomes generation 1: no link, no copy, no file's status moves.
        let n = try store.adoptPlainFolder()
        report.notice("\(store.destPath): the set it held is kept as generation \(n), for `mirror rollback`")
        return true
    }
}
