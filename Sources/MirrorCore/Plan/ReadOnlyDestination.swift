import MirrorFS
import MirrorState

/// What a plan made without the lock reads of DEST (`sync --dry-run`, ``PlanLookAhead``): the
/// folder (nil when it does not exist yet), its journal and its partial-download folder (nil
/// when there are none), opened without creating, locking or repairing anything.
struct ReadOnlyDestination {
    var destination: Destination?
    var journal: Journal?
    var partials: FileDescriptor?
    /// The state folder (`.mirror`), nil when there is none yet.
    var state: FileDescriptor?
    /// DEST is a generation store (`--atomic`), as seen when it was opened.
    var isAtomic: Bool

    /// Opens DEST read-only. Independent of the manifest, so ``SyncSession`` starts it
    /// (``Background``) before the manifest is parsed. Throws what a run would stop on before
    /// planning: a destination that cannot be a folder.
    static func open(_ destPath: String) throws -> ReadOnlyDestination {
        let atomic = GenerationStore.isAtomic(destPath)
        let dest = try Destination.openExisting(destPath)
        let state = try? dest?.stateFolder(create: false)
        let journal = state.flatMap { try? Journal(folder: $0, displayPath: destPath + "/.mirror/journal", readOnly: true) }
        let partials = try? dest?.stateFolder("partial", create: false)
        return ReadOnlyDestination(destination: dest, journal: journal, partials: partials ?? nil, state: state ?? nil, isAtomic: atomic)
    }
}
