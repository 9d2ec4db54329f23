import MirrorFS
import MirrorModel
import MirrorState

/// What the journal says about one partial file: every `partial` and `forget` record a download
/// writes is built here (docs/journal.md, rules 1, 3 and 8), apart from the bytes and their hashing
/// (``PartialFile``), so what a record may vouch for is decided in one place.
///
/// Every record is appended durably (`fsync` of the journal): each one either stops the journal
/// vouching for bytes that are about to change, or vouches for bytes already made durable.
struct PartialJournal {
    let writer: JournalWriter
    let identity: EntryIdentity

    /// Whether the journal holds a partial record for this path (of any identity).
    var hasRecord: Bool { writer.journal.partialRecord(for: identity.path) != nil }

    /// The journal stops vouching for the file under this name, before anything changes it: a
    /// later run must never restore a hash state over other bytes (rule 8).
    func forget() throws {
        try writer.append(.forget(path: identity.path), durable: true)
    }

    /// ``forget()``, when there is a record to forget.
    func forgetIfRecorded() throws {
        if hasRecord { try forget() }
    }

    /// Records `bytes` (per segment when `segments` is given) of the file without hash states:
    /// a run that resumes it reads them back and hashes them before it trusts one, so the record
    /// vouches for none of them and needs no proof (``JournalNote/partialWithoutStates(_:)``).
    func record(url: String, validator: String?, bytes: Int64, segments: [SegmentRecord]? = nil) throws {
        let record = PartialRecord(identity: identity, url: url, validator: validator, bytes: bytes, segments: segments)
        try writer.append(.partialWithoutStates(record), durable: true)
    }

    /// A checkpoint: vouches for the first `bytes` bytes with the hash states after exactly them,
    /// and for each segment's durable bytes when `segments` is given.
    ///
    /// - Parameters:
    ///   - status: the partial file's identity taken (`fstat`) before the `fdatasync` that made
    ///     these bytes durable; only then may a later run restore `states` (``PartialRecord/describes(_:owner:)``).
    ///   - proof: what that `fdatasync` returned (``Synced``): the record cannot be written without it.
    func checkpoint(url: String, validator: String?, bytes: Int64, states: PerAlgorithm<String>,
                    segments: [SegmentRecord]?, status: FileStatus, proof: consuming Synced) throws {
        let record = PartialRecord(identity: identity, url: url, validator: validator, bytes: bytes, hashStates: states,
                                   segments: segments, fileInode: status.inode, fileChangeTime: status.ctime)
        try writer.append(checkpoint: record, proof: proof)
    }
}
