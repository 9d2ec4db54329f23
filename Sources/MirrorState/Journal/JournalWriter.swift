import MirrorFS
import MirrorKit

/// The one writer of DEST's journal (docs/journal.md, "One writer"): every record a run writes
/// is handed to it, and nothing else can append, sync or compact. A sync makes one when it has
/// opened DEST's state under the lock; planning, content lookups, `status` and `--dry-run` hold
/// the ``Journal`` alone, whose records they read and cannot change.
///
/// Three kinds of threads hand it records (docs/architecture.md, "Threads"):
/// - `mirror-writer`: a partial file's `partial` and `forget` records, each durable
///   (`PartialJournal`, the only place those records are built);
/// - `mirror-commit`: an install batch's `verified` and `forget all=1` records, one write and one
///   `fdatasync` (`Installer`);
/// - the sync thread: `failed` records, deletions' `forget all=1`, the `verified` records of files
///   relinked into a generation, and the `run` record.
///
/// The transfer threads never hold it: no libcurl callback writes or syncs the journal.
///
/// The appends are serialised by the journal's lock. A durable append returns after the journal's
/// `fdatasync`: the caller made the data its records describe durable first (docs/journal.md,
/// rule 1).
public final class JournalWriter: Sendable {
    /// The journal written, for reading: lookups see every record appended so far.
    public let journal: Journal

    public init(_ journal: Journal) {
        self.journal = journal
    }

    /// Appends `record`; with `durable`, `fdatasync`s the journal before returning.
    public func append(_ record: JournalRecord, durable: Bool) throws {
        try journal.write([record], durable: durable)
    }

    /// Appends `records` with one `write` (a group commit's records), durable as for one record.
    /// Their lines are whole and checksummed each, so a crash in the middle of the write leaves
    /// whole records and at most one torn line, which recovery drops (docs/journal.md).
    public func append(_ records: [JournalRecord], durable: Bool = false) throws {
        try journal.write(records, durable: durable)
    }

    /// Makes every appended record durable.
    public func sync() throws {
        try journal.syncFile()
    }

    // Compaction, the other way the file changes, is ``compact(current:)`` (Journal+Compaction.swift).
}

extension Journal {
    /// The one append: only ``JournalWriter`` calls it (it is private to this file).
    fileprivate func write(_ records: [JournalRecord], durable: Bool) throws {
        lock.lock()
        defer { lock.unlock() }
        guard let file, !records.isEmpty else { return }
        var lines: [UInt8] = []
        lines.reserveCapacity(records.count * 256)
        for record in records { record.encode(into: &lines) }
        try file.append(lines)
        length += Int64(lines.count)
        reserve.keep(file, length: length)
        for record in records { apply(record) }
        lineCount += records.count
        if durable { try file.syncData() }
    }

    fileprivate func syncFile() throws {
        lock.lock()
        defer { lock.unlock() }
        try file?.syncData()
    }
}
