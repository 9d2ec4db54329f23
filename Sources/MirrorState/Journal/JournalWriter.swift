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
///   found and hashed, or relinked into a generation, and the `run` record.
///
/// What a record may claim is in its type: a ``JournalNote`` vouches for no byte and is appended
/// as it is; a `verified` record, or a `partial` one with hash states, is appended only with the
/// ``Synced`` proof that the sync of its bytes returned (``append(verified:notes:proof:)``,
/// ``append(checkpoint:proof:)``), or as a restatement of what the journal already vouches for
/// (``restate(_:)``). The sync calls are MirrorFS's, the only layer that makes a proof, so this
/// layer cannot vouch for bytes nobody synced.
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

    /// Appends `note`; with `durable`, `fdatasync`s the journal before returning.
    public func append(_ note: JournalNote, durable: Bool) throws {
        try journal.write([note.record], durable: durable)
    }

    /// Appends `notes` with one `write`, durable as for one. Their lines are whole and
    /// checksummed each, so a crash in the middle of the write leaves whole records and at most
    /// one torn line, which recovery drops (docs/journal.md).
    public func append(_ notes: [JournalNote], durable: Bool = false) throws {
        try journal.write(notes.map(\.record), durable: durable)
    }

    /// Appends `verified` records of files whose bytes `proof`'s sync made durable, after
    /// `notes` (an install batch's intents and removals), in one `write`, and `fdatasync`s the
    /// journal: rule 1's order, data, then the record, then the journal, in one call that cannot
    /// be made without the sync (``Synced``). A record of a file the sync did not cover (another
    /// inode, another file system) is refused before anything is written.
    public func append(verified: [VerifiedRecord], notes: [JournalNote] = [], proof: consuming Synced) throws {
        for record in verified where !proof.covers(device: record.device, inode: record.inode) {
            throw Unproven(path: record.identity.path)
        }
        try journal.write(notes.map(\.record) + verified.map { .verified($0) }, durable: true)
    }

    /// Appends a checkpoint: `record`'s hash states describe bytes `proof`'s `fdatasync` made
    /// durable (docs/journal.md, "Checkpoint"); durable before it returns. The record names the
    /// file's inode, which the sync must have covered.
    public func append(checkpoint record: PartialRecord, proof: consuming Synced) throws {
        if let inode = record.fileInode, case .file(_, let synced) = proof.scope, synced != inode {
            throw Unproven(path: record.identity.path)
        }
        try journal.write([.partial(record)], durable: true)
    }

    /// Appends `records` that restate what the journal already vouches for: each path's latest
    /// `verified` record is the same entry in the same inode, of the same size and modification
    /// time, and only the change time moved (a link made into a generation, or one pruned).
    /// No byte is vouched for anew, so no sync is asked; a record that is not such a restatement
    /// is refused before anything is written.
    public func restate(_ records: [VerifiedRecord]) throws {
        for record in records {
            guard let known = journal.records(for: record.identity.path)?.verified, known.identity.size == record.identity.size,
                  !record.identity.digests.isEmpty, record.identity.digests.allSatisfy({ known.identity.digests[$0.algorithm] == $0.value }),
                  known.inode == record.inode, known.device == record.device, known.mtime == record.mtime else {
                throw Unproven(path: record.identity.path)
            }
        }
        try journal.write(records.map { .verified($0) }, durable: false)
    }

    /// A record of bytes no sync proved, refused: a defect of the caller, which the tests show;
    /// in a run it fails what it was to record, and a later run hashes the file again.
    public struct Unproven: Error, CustomStringConvertible, Sendable {
        public let path: String
        public var description: String { "internal error: a journal record of \(path) vouches for bytes no sync made durable; it was not written" }
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
