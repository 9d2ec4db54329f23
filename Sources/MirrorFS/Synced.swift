/// Proof that bytes reached stable storage: what a journal record that vouches for bytes must be
/// handed with (docs/journal.md, rule 1: the data durable, then the record, then the journal).
///
/// Only this module's sync calls make one: ``FileDescriptor/syncData()`` (`fdatasync(2)`) and
/// ``FileDescriptor/sync()`` (`fsync(2)`) for one file, ``FileDescriptor/syncFilesystem()``
/// (`syncfs(2)`) for every file of a file system. Its initializer is internal, so no other layer
/// can make one without the call; `JournalWriter` (MirrorState) takes it, consumed, with the
/// `verified` records and the hash-state checkpoints it vouches for, and checks that each record's
/// file is one the sync covered (the same inode, or the same file system). Noncopyable: one sync
/// proves one append, so a proof cannot be kept and shown again after the bytes changed.
///
/// The model is SQLite's pager, where only the pager syncs and the journal's header is written
/// only after the pages it describes (`pager.c`, "the journal file is synced before the database").
public struct Synced: ~Copyable, Sendable {
    /// What the sync made durable.
    public enum Scope: Sendable, Equatable {
        /// One file's data (`fdatasync`, `fsync`): the inode on its device.
        case file(device: UInt64, inode: UInt64)
        /// Every file of a file system (`syncfs`).
        case fileSystem(device: UInt64)
    }

    public let scope: Scope

    init(scope: Scope) { self.scope = scope }

    /// Made after a sync succeeded, from the synced descriptor's status (``FileDescriptor/stat()``):
    /// the file, or (`wholeFileSystem`) its file system. A status that could not be read names no
    /// file, which proves nothing: a device no record has.
    init(of status: FileStatus?, wholeFileSystem: Bool) {
        guard let status else {
            self.init(scope: .fileSystem(device: .max))
            return
        }
        self.init(scope: wholeFileSystem ? .fileSystem(device: status.device) : .file(device: status.device, inode: status.inode))
    }

    /// Whether a record of the file `inode` on `device` may be vouched for by this sync.
    public func covers(device: UInt64, inode: UInt64) -> Bool {
        switch scope {
        case .file(let d, let i): d == device && i == inode
        case .fileSystem(let d): d == device
        }
    }
}
