import MirrorFS
import MirrorKit
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// What `verify` found, told to the next `sync` and `status` (docs/cli.md, "mirror verify").
///
/// A file whose bytes changed in place with its size and modification time kept (a bad disk
/// sector, a tool that rewrites and restores times) still matches its journal record but for the
/// change time, which the journal may trust (docs/journal.md, "When the change time moves"), so
/// a sync would skip it for ever. `verify` read its bytes and knows better: under DEST's lock,
/// taken without waiting, the journal forgets the record of each such file (`forget all=1`) while
/// the record still names the very file read (same inode, size and modification time), so the
/// next sync hashes it, finds the mismatch and fetches the file again, and `status` calls it
/// `unverified` meanwhile. Nothing else is written; no file is touched.
public enum DamageRecord {
    public enum Outcome: Equatable, Sendable {
        /// Nothing to record: no corrupt file the journal vouched for.
        case nothing
        /// This many records forgotten (durably).
        case recorded(Int)
        /// Another run holds DEST's lock: nothing recorded.
        case busy(String)
    }

    /// Makes DEST's journal forget the records of the corrupt files in `problems` that still
    /// name the file `verify` read.
    public static func record(_ problems: [VerifyProblem], destinationPath: String) throws -> Outcome {
        let damaged = problems.filter { $0.kind == .corrupt && $0.found != nil }
        guard !damaged.isEmpty else { return .nothing }
        let identity = try DestinationIdentity.resolve(destinationPath)
        let lock: DestinationLock
        do {
            guard let taken = try DestinationLock.take(identity, creating: .nothing, wait: false) else { return .nothing }
            lock = taken
        } catch let failure as DestinationLock.Failure {
            return .busy(failure.description)
        }
        defer { lock.release() }
        guard let state = lock.stateFolder else { return .nothing }
        var st = stat()
        guard fstatat(state.fd, Journal.fileName, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return .nothing }
        let journal = try Journal(folder: state, displayPath: state.displayPath + "/journal", readOnly: false)
        let writer = JournalWriter(journal)
        var forgotten = 0
        for problem in damaged {
            guard let found = problem.found, let record = journal.records(for: problem.path)?.verified,
                  record.matchesButForChangeTime(found) else { continue }
            try writer.append(.removed(path: problem.path), durable: false)
            forgotten += 1
        }
        if forgotten > 0 { try writer.sync() }
        return forgotten > 0 ? .recorded(forgotten) : .nothing
    }
}
