#if canImport(Glibc)
import Glibc
#endif

extension SyncRunner {
    /// Opens what the run works in, before planning: DEST (for an atomic DEST, the building folder
    /// of its ``GenerationStore``), the state folder and its partial folder (both owned by this user,
    /// SECURITY.md), the lock, the journal (compacted when due) and the installer. Returns the lock
    /// and, for an atomic DEST, the set it shows now (nil for a plain DEST).
    func openState(_ destPath: String) throws -> (DestinationLock, Destination?) {
        var adopted: DestinationLock?
        var current: Destination?
        if options.atomic || GenerationStore.isAtomic(destPath) {
            let store = try GenerationStore.open(destPath, create: true)
            generations = store
            if let store {
                adopted = try adoptPlainState(store)
                current = try Destination.openExisting(destPath)
                destination = try Destination.building(store)
            }
        }
        if destination == nil { destination = try Destination.create(destPath) }
        guard let state = try destination.stateFolder(create: true),
              let partials = try destination.stateFolder("partial", create: true) else {
            throw SystemError("create", destination.displayState(Destination.stateFolderName), code: ENOENT)
        }
        // Nobody else may have written what the run is about to trust (SECURITY.md).
        try StateOwnership.require(state, destination.displayState(Destination.stateFolderName))
        try StateOwnership.require(partials, destination.displayState(".mirror/partial"))
        partialFolder = partials
        let lock = try adopted ?? DestinationLock(stateFolder: state, destination: destPath, wait: options.waitForLock)
        partialNaming = PartialNaming(canLinkOpenFiles: PartialFile.canLinkUnnamedFiles(in: partials))
        journal = try Journal(folder: state, displayPath: destination.displayState(".mirror/journal"), readOnly: false)
        if journal.needsCompaction(liveEntries: manifest.entries.count) { try compactJournal() }
        installer = Installer(destination: destination, partialFolder: partials, journal: journal)
        contentIndex = ContentIndex(journal: journal, destinations: [destination] + (current.map { [$0] } ?? []), seeds: options.seeds)
        localTrees = [destination] + (current.map { [$0] } ?? [])
        return (lock, current)
    }
}
