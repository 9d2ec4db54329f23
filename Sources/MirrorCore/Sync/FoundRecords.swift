import MirrorFS
import MirrorState

/// Files found at their paths and hashed (``Installer/check(_:policy:)``), whose `verified`
/// records wait for one `syncfs` that makes their bytes durable before the records are appended
/// (docs/journal.md, rule 1; ``JournalWriter/append(verified:notes:proof:)``).
///
/// Why a batch: mirror did not write these bytes, and a program that did may not have synced them,
/// so a record must follow a sync. One `fdatasync` per file asks the disk to flush its cache each
/// time even when nothing is dirty (about 0.2 ms here), which would add minutes to the first run
/// over 10^6 files already in place; one `syncfs` and one `fdatasync` of the journal per batch
/// cost a flush each. A batch is due a second after its first record (``interval``), as a
/// download's checkpoint is due after 8 MiB or 30 s: 10^6 files of 64 to 1063 bytes, found at
/// 20,000 a second, took 46 s to adopt with no sync and 53 s with one per 4096 files (a flush every
/// 0.2 s); one a second costs a few percent (docs/performance.md, "Files found in place"). A run
/// killed before a batch's records costs the next run a second hash of at most a second's work,
/// never a record of bytes that were not durable. The sync thread alone holds it (``SyncRunner``).
struct FoundRecords {
    /// Seconds a record waits at most for its batch's sync, while files keep being found.
    static let interval = 1.0
    /// Records at most in one batch, whatever the time: memory, and what a kill costs.
    static let limit = 65536

    private(set) var waiting: [VerifiedRecord] = []
    /// Monotonic time of the oldest waiting record.
    private var since = 0.0

    /// Whether the waiting records are to be synced and appended now.
    func isDue(now: Double) -> Bool {
        !waiting.isEmpty && (waiting.count >= FoundRecords.limit || now - since >= FoundRecords.interval)
    }

    mutating func add(_ record: VerifiedRecord, now: Double) {
        if waiting.isEmpty { since = now }
        waiting.append(record)
    }

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
