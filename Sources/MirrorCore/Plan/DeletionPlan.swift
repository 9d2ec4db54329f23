import MirrorFS
import MirrorState

/// Which files a sync run may delete (docs/cli.md, "Deleting").
public enum DeletionMode: Sendable, Equatable {
    /// `--delete`: files an earlier run installed (the journal's verified records, not adopted)
    /// whose paths the manifest no longer lists, each still the very file installed.
    case installed
    /// `--delete-unlisted`: everything in DEST that the manifest does not list, but `.mirror/`,
    /// for a destination only mirror writes.
    case unlisted
}

/// What deleting would do in DEST, worked out before anything is removed, so that the guardrails
/// (``DeletionPolicy``) count it whole and `--dry-run` can list it. Paths are bytes: a name
/// found in DEST need not be UTF-8, and two spellings of one name are two files.
public struct DeletionPlan: Sendable {
    public typealias Item = SeenFile

    /// Files (and symlinks, and other non-folders with `--delete-unlisted`) to remove.
    public var files: [Item] = []
    /// Folders to remove once empty, deepest first: folders that held a file removed here and
    /// that no listed entry lies in. A folder that still holds anything stays.
    public var folders: [[UInt8]] = []
    /// With `--delete-unlisted`, the folders in DEST that a listed entry lies in: every other
    /// folder goes too, once empty. Those are found by a walk when the files are gone
    /// (``Destination/removeEmptyFolders(skippingTopLevel:keeping:)``), not listed in ``folders``:
    /// the paths of a chain of folders n deep would take n²/2 names' bytes.
    public var keptFolders: Set<PathKey>?
    /// With `--delete-unlisted`, folders that are destinations of their own (they hold a
    /// `.mirror`; ``NestedDestinations``): nothing in them is removed, not even an empty folder.
    public var otherDestinations: Set<PathKey> = []
    /// Paths the journal says mirror installed but that changed since (another inode, size or
    /// time): kept, with a warning, and forgotten by the journal (they are the user's now).
    public var changed: [String] = []
    /// Journal records that vouch for nothing in DEST any more (the file is gone, or mirror only
    /// found it there): dropped from the journal, nothing on disk is touched.
    public var stale: [String] = []
    /// What ``DeletionPolicy``'s percentage counts from.
    public var known = 0

    public init() {}

    public var isEmpty: Bool { files.isEmpty && changed.isEmpty && stale.isEmpty }
}
