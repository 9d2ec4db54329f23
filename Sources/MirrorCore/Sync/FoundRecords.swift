import MirrorFS
import MirrorState

/// Files found at their paths and hashed (``Installer/check(_:policy:)``), whose `verified`
/// records wait for one `syncfs` that makes their bytes durable before the records are appended
/// (docs/journal.md, rule 1; ``JournalWriter/append(verified:notes:proof:)``).
///
/// Why a batch: mirror did not write these bytes, and a program that did may not have synced them,
/// so a record must follow a sync. One `fdatasync` per file asks the disk to flush its cache each
/// time even when nothing is dirty (about 0.2 ms here), which would add minutes to the first run
/// over 10^6 files already in place; one `syncfs` per ``limit`` files costs a flush per batch. A
/// run killed before a batch's records costs the next run a second hash of those files, never a
/// record of bytes that were not durable. The sync thread alone holds it (``SyncRunner``).
struct FoundRecords {
    /// Records at most waiting for their sync.
    static let limit = 4096

    private(set) var waiting: [VerifiedRecord] = []

    var isFull: Bool { waiting.count >= FoundRecords.limit }

    mutating func add(_ record: VerifiedRecord) { waiting.append(record) }

    /// `syncfs(2)` of `folder`'s file system, then the waiting records, then the journal's
    /// `fdatasync`. A record of a file on another file system (a mount inside DEST) is refused by
    /// the writer; ``Installer/check(_:policy:)`` syncs such a file itself and never queues it.
    mutating func flush(to writer: JournalWriter, syncing folder: FileDescriptor) throws {
        guard !waiting.isEmpty else { return }
        let records = waiting
        waiting = []
        try writer.append(verified: records, proof: try folder.syncFilesystem())
    }
}
