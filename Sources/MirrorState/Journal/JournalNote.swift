/// A journal record that vouches for no byte: what ``JournalWriter/append(_:durable:)`` takes
/// without a proof of durability (docs/journal.md, rule 1).
///
/// A `verified` record and a `partial` record with hash states say that bytes on disk are known:
/// a later run skips the file, or restores a hash state instead of reading the bytes again. Those
/// are appended only with a ``Synced`` from the sync that made the bytes durable
/// (``JournalWriter/append(verified:notes:proof:)``, ``JournalWriter/append(checkpoint:proof:)``),
/// or restate what the journal already vouches for (``JournalWriter/restate(_:)``). Every other
/// record is a note: it drops or narrows what the journal vouches for (`forget`, `removed`), or
/// tells of a failure, a run, or a partial file's byte count that a later run reads back and
/// hashes before it trusts a byte. A note cannot hold a `verified` record: the compiler refuses
/// `.verified(...)` where a note is asked for.
public struct JournalNote: Equatable, Sendable {
    let record: JournalRecord

    private init(_ record: JournalRecord) { self.record = record }

    /// The partial file was discarded.
    public static func forget(path: String) -> JournalNote { JournalNote(.forget(path: path)) }

    /// The file at `path` was deleted or is no longer mirror's (``JournalRecord/removed(path:)``).
    public static func removed(path: String) -> JournalNote { JournalNote(.removed(path: path)) }

    /// The entry failed in the run that tried it.
    public static func failed(_ record: FailedRecord) -> JournalNote { JournalNote(.failed(record)) }

    /// A run ended.
    public static func run(_ record: RunRecord) -> JournalNote { JournalNote(.run(record)) }

    /// A partial file's record without its hash states: its bytes are read back and hashed by
    /// any run that resumes it, so it vouches for none of them (an install's intent, bytes kept
    /// from an earlier run). States given here are dropped, which costs a later run a read of
    /// the bytes, never a wrong file.
    public static func partialWithoutStates(_ record: PartialRecord) -> JournalNote {
        var record = record
        record.hashStates = [:]
        return JournalNote(.partial(record))
    }
}
