import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// The last leg of a byte's way: a complete partial file is verified against the manifest, sealed
/// (mode, mtime), made durable, renamed into place and only then journaled as verified
/// (docs/journal.md, rule 1; ``InstallBatch`` explains the group commit). Also checks files that
/// are already at their path but unknown to the journal.
///
/// It decides nothing about retries or reporting: each call returns what happened, and
/// ``SyncRunner`` turns that into the next attempt, a failure or a line of output.
final class Installer {
    let destination: Destination
    let partialFolder: FileDescriptor
    /// The journal's writer, the batch's records' one way in (``JournalWriter``).
    let writer: JournalWriter
    var journal: Journal { writer.journal }
    private let batch = InstallBatch()

    /// The commit's own part, `Sendable`, which the commit thread runs.
    let commits: InstallCommit

    init(destination: Destination, partialFolder: FileDescriptor, writer: JournalWriter) {
        self.destination = destination
        self.partialFolder = partialFolder
        self.writer = writer
        commits = InstallCommit(destination: destination, partialFolder: partialFolder, writer: writer)
        stateDevice = try? partialFolder.stat().device
    }

    /// The file system of DEST's state, which a batch's `syncfs` reaches (``FoundRecords``): one
    /// `fstat` per run, not one per file found. nil when it cannot be read: every file found is
    /// then synced on its own, which costs time, never a record of bytes not durable.
    private let stateDevice: UInt64?

    enum Verdict {
        /// The digests match; the file is sealed and waits in the batch.
        case queued
        /// The bytes are not the manifest's: `detail` says expected and got; `got` is the digest
        /// of the bytes received (the same twice from one source: it holds other content).
        case mismatch(detail: String, got: String)
        case failed(Error)
    }

    /// Waits for the file's digests, compares them with the manifest and queues a match.
    func verify(_ partial: PartialFile, for task: EntryTask) -> Verdict {
        let entry = task.entry
        do {
            let digests = try partial.finishDigests()
            guard FileHashing.matches(entry, digests) else {
                return .mismatch(detail: FileHashing.mismatchDescription(entry, digests),
                                 got: digests.first { _ in true }?.value.hex ?? "")
            }
            try seal(partial, mode: FoundFilePolicy.wantedMode(entry), mtime: entry.mtime)
            batch.add(task, partial)
            return .queued
        } catch {
            return .failed(error)
        }
    }

    /// Makes a verified partial file ready to install: permission bits (`fchmod`), then the
    /// modification time (`futimens`). Its data and this metadata are made durable by ``commit()``
    /// (`fsync` of the file, or ``InstallBatch``'s `syncfs`) before the rename makes it visible.
    private func seal(_ partial: PartialFile, mode: UInt32, mtime: FileTime?) throws {
        let file = partial.file
        if DiskChange.fchmod(file.fd, mode_t(mode)) != 0 { throw SystemError("set permissions of", partial.displayPath) }
        if let mtime { try Installer.setModificationTime(file.fd, mtime, partial.displayPath) }
    }

    /// `UTIME_OMIT` from <sys/stat.h> (a macro Swift does not import): leave the access time alone.
    static let utimeOmit = (1 << 30) - 2

    func isDue(now: Double) -> Bool { batch.isDue(now: now) }
    func timeUntilDue(now: Double) -> Double? { batch.timeUntilDue(now: now) }

    struct Committed {
        var installed: [(task: EntryTask, partial: PartialFile)] = []
        var failed: [(task: EntryTask, error: Error)] = []
        /// The destination refused a write (full, read-only): the run stops (exit 73).
        var fatal: SystemError?
    }

    /// Files verified and waiting for a commit.
    var waiting: Int { batch.items.count }

    /// Takes the waiting files, for a ``commit(_:)`` on another thread (``CommitThread``).
    func takeBatch() -> [InstallBatch.Item] { batch.take() }

    /// Makes the waiting verified files durable, renames them into place and journals them.
    func commit() -> Committed { commit(batch.take()) }

    /// Makes `items` durable, renames them into place and journals them (``InstallCommit``),
    /// here; the commit thread runs the same steps on its own (``CommitThread``).
    func commit(_ items: [InstallBatch.Item]) -> Committed {
        Installer.committed(items, commits.commit(items.map(\.placement)))
    }

    /// What became of `items`, from the commit's outcome by index.
    static func committed(_ items: [InstallBatch.Item], _ outcome: InstallCommit.Outcome) -> Committed {
        Committed(installed: outcome.installed.map { (items[$0].task, items[$0].partial) },
                  failed: outcome.failed.map { (items[$0.index].task, $0.error) },
                  fatal: outcome.fatal)
    }

    /// A copy of the bytes of a file found at the entry's path (``CheckResult/copy(_:mirrors:)``)
    /// keeps that file's standing: found, not installed, so `--delete` leaves it (`found=1`),
    /// unless the file found was mirror's own. A copy that failed its digest and was then
    /// downloaded is an install like any other.
    static func isFoundCopy(_ item: InstallBatch.Item) -> Bool {
        guard item.task.attempt.copyFound, !item.task.attempt.foundIsMirrors, let local = item.task.attempt.copiedFrom else {
            return false
        }
        return item.partial.sourceURL == "file://" + local
    }

    /// Whether the file found at `path` (its `stat` before anything was done to it) is one mirror
    /// installed: the journal's `verified` record of the path, not `found=1`, is this inode as
    /// recorded (``VerifiedRecord/matches(_:trust:)``), or the path's `partial` record names this
    /// inode as this entry's (a run killed between the install and its record, ``InstalledFile``). A manifest that only changes the entry's
    /// `mode` or `mtime` sends such a file through ``check(_:policy:)``; it stays mirror's, so
    /// `--delete` still removes it once no manifest lists it (docs/cli.md, "Deleting").
    func isMirrors(_ before: FileStatus, at path: String, entry: ManifestEntry) -> Bool {
        let records = writer.journal.records(for: path)
        if let record = records?.verified, !record.adopted, record.matches(before) { return true }
        // Installed by a run killed before the file's `verified` record (``InstalledFile``).
        return InstalledFile.leftByInstall(records, status: before)?.identity == EntryIdentity(entry)
    }

    /// Sets the modification time of the open file `fd` (`futimens(2)`), leaving its access time.
    static func setModificationTime(_ fd: Int32, _ mtime: FileTime, _ display: String) throws {
        var times = [timespec(tv_sec: 0, tv_nsec: Installer.utimeOmit),
                     timespec(tv_sec: Int(mtime.seconds), tv_nsec: Int(mtime.nanoseconds))]
        if DiskChange.futimens(fd, &times) != 0 { throw SystemError("set modification time of", display) }
    }

    enum CheckResult {
        /// The file is the manifest's and may stay as it is (its mode fixed where only that was
        /// wrong, ``FoundFilePolicy``). `waiting`: its record, to be appended after the `syncfs`
        /// of its batch (``FoundRecords``); nil when it is journaled already (a file on another
        /// file system than DEST's state, synced and journaled on its own).
        case verified(waiting: VerifiedRecord?)
        /// Other bytes (or bytes that changed while read): fetch the entry again.
        case differs
        /// The file may not be vouched for as it is (another user's, or others may write it, or
        /// its metadata is to change and it has other names): its bytes are to be copied into a
        /// new file of this user's, verified like a download. `mirrors`: the file found is one
        /// mirror installed (``isMirrors(_:at:)``), so the copy is mirror's too.
        case copy(FoundFilePolicy.CopyReason, mirrors: Bool)
        /// The present file cannot be opened or read (permissions), or its mode cannot be set: that entry fails.
        case unreadable(Error)
        /// Journaling failed: with a destination that refuses writes, the run stops.
        case failed(Error)
    }

    /// Hashes a file that is at its path but unknown to the journal. A match is journaled once
    /// its bytes are durable (``FoundRecords``); a mismatch is fetched again, and the present file
    /// stays until the new copy verifies.
    ///
    /// Before a byte is read, ``FoundFilePolicy`` decides from its `fstat` whether mirror may vouch
    /// for this inode at all: another user's file, or one group or others may write, is not
    /// hashed in place but copied (``CheckResult/copy(_:)``); this user's file with only another
    /// mode is hashed, then `fchmod`ed through the same descriptor and journaled with its new
    /// change time.
    func check(_ entry: ManifestEntry, policy: FoundFilePolicy = .current) -> CheckResult {
        var status: FileStatus
        var own = false
        var synced: Synced?
        do {
            let file = try destination.openForReading(entry.path)
            defer { file.close() }
            let before = try file.stat()
            let decision = policy.decide(before, for: entry)
            if case .copy(let reason) = decision { return .copy(reason, mirrors: isMirrors(before, at: entry.path, entry: entry)) }
            let digests = try FileHashing.digests(of: file, for: entry)
            status = try file.stat()
            // A file written while it was read may hold bytes other than those hashed: it is
            // vouched for only if its change time did not move (a later run checks it again).
            guard FileHashing.matches(entry, digests), status == before else { return .differs }
            own = isMirrors(before, at: entry.path, entry: entry)
            if case .fixInPlace(let mode, let mtime) = decision {
                // fchmod(2) and futimens(2) on the descriptor hashed: the very inode, whatever is
                // at the name now.
                if before.permissions != mode, DiskChange.fchmod(file.fd, mode_t(mode)) != 0 {
                    throw SystemError("set permissions of", file.displayPath)
                }
                if let mtime { try Installer.setModificationTime(file.fd, mtime, file.displayPath) }
                status = try file.stat()
            }
            // On another file system than DEST's state (a mount inside DEST), which the batch's
            // `syncfs` does not reach (``FoundRecords``): this file's own `fdatasync`, now.
            if stateDevice != status.device { synced = try file.syncData() }
        } catch {
            return .unreadable(error)
        }
        let record = VerifiedRecord(identity: EntryIdentity(entry), status: status, adopted: !own)
        guard let synced = synced.take() else { return .verified(waiting: record) }
        do {
            try writer.append(verified: [record], proof: synced)
            return .verified(waiting: nil)
        } catch {
            return .failed(error)
        }
    }
}
