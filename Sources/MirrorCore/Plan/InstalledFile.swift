import MirrorFS
import MirrorModel
import MirrorState

/// Whether the file at a path is one mirror put there, when its `verified` record is missing:
/// a run killed (or a machine that lost power) after an install's rename or link and before the
/// batch's `verified` records reached the journal (docs/journal.md, "Durability").
///
/// Every file is installed from its partial file, whose inode the rename or link keeps, and
/// before it is installed the path's `partial` record names that inode (written at the partial
/// file's checkpoints, or, for a small download with no name, just before the batch installs:
/// ``InstallCommit/commit(_:)``). A `verified` record clears it. So a `partial` record that names the
/// inode now at the path, with its entry's size, says mirror installed that file and did not get
/// to record it: the next run records it as installed (not `found=1`), and a path that turns can
/// replace it, once its bytes are hashed and found to be that entry's.
enum InstalledFile {
    /// The path's `partial` record, when it names the file `status` (same inode, the entry's size).
    static func leftByInstall(_ records: EntryRecords?, status: FileStatus) -> PartialRecord? {
        guard let partial = records?.partial, let inode = partial.fileInode, status.isRegularFile,
              status.inode == inode, status.size == partial.identity.size else { return nil }
        return partial
    }

    /// For a removal (``PathTurn``): the `verified` record vouches for this very file
    /// (``PathTurn/vouches(_:for:)``), or ``leftByInstall(_:status:)`` names it and it still holds
    /// that entry's bytes (read and hashed now: the removal must not take a file someone changed).
    static func vouches(path: String, status: FileStatus, records: EntryRecords?, in destination: Destination) -> Bool {
        if PathTurn.vouches(records?.verified, for: status) { return true }
        guard let partial = leftByInstall(records, status: status),
              let file = try? destination.openForReading(path) else { return false }
        defer { file.close() }
        guard let opened = try? file.stat(), opened == status else { return false }
        return (try? FileHashing.holds(file, digests: partial.identity.digests)) == true
    }
}
