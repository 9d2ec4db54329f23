import MirrorFS
import MirrorKit
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// Compaction (docs/journal.md, "Compaction"): the journal rewritten with only the records still
/// relevant, so that its size follows the manifest's rather than the number of runs.
///
/// It streams. Each latest verified record is asked where it lies in the index (a path lookup in
/// the manifest and a compare of size and digests, nothing decoded), and a kept one is encoded
/// into a 4 MB buffer that is written out when full; then the new file is read back in chunks,
/// as an open reads it. Keeping every latest record decoded in a dictionary, the manifest's
/// identities in a set and the whole new file in memory took 1.8 GB and 15.6 s for a DEST of
/// 10^6 files (docs/performance.md, "Compaction at 10^6 files").
extension JournalWriter {
    /// Rewrites the journal with the records `current` still needs (``Journal/compact(current:)``):
    /// the journal's writer is the only one that may.
    package func compact(current: Journal.CurrentEntry) throws {
        try journal.compact(current: current)
    }
}

extension Journal {
    /// The manifest's entry at a path (its bytes), or nil when the manifest does not list it.
    package typealias CurrentEntry = (UnsafeBufferPointer<UInt8>) -> ManifestEntry?

    /// Rewrites the journal with:
    /// - the verified records of paths the manifest lists with the same size and digests, and of
    ///   paths it no longer lists (files an earlier run installed, which `--delete` may remove);
    /// - the partial and failed records of entries the manifest lists as they were recorded;
    /// - the last run, and the last successful one: last, or first when records followed the
    ///   last run (a killed run), which a conversion to `--atomic` must still see.
    ///
    /// Per path, a verified record comes before a partial one and a failed one, as replay needs
    /// (a verified record clears the path's others). Atomic replacement: write `journal.tmp`,
    /// `fsync` it, `renameat` over `journal`, `fsync` the folder; a crash at any point leaves the
    /// old journal or the new one, both complete.
    fileprivate func compact(current: CurrentEntry) throws {
        lock.lock()
        defer { lock.unlock() }
        guard file != nil else { return }

        let tmpName = Journal.fileName + ".tmp"
        // A new file (O_EXCL after removing any leftover): a link planted at journal.tmp is
        // removed, never truncated or written through.
        if DiskChange.unlinkat(folder.fd, tmpName, 0) != 0 && errno != ENOENT { throw SystemError("remove", displayPath + ".tmp") }
        let fd = SafePath.open(tmpName, beneath: folder.fd, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o644)
        if fd < 0 { throw SystemError("write", displayPath + ".tmp") }
        let tmp = FileDescriptor(fd: fd, displayPath: displayPath + ".tmp")
        var renamed = false
        defer {
            tmp.close()
            // A write that failed (a full disk) leaves no half journal behind; the old one stays.
            if !renamed { _ = DiskChange.unlinkat(folder.fd, tmpName, 0) }
        }

        let flushAt = 4 << 20
        var out = Journal.header
        out.reserveCapacity(flushAt + 64 << 10)
        func add(_ record: JournalRecord) throws {
            record.encode(into: &out)
            if out.count >= flushAt {
                try tmp.append(out)
                out.removeAll(keepingCapacity: true)
            }
        }
        // A run that was killed after the last `run` record wrote records that say DEST may have
        // changed since (``recordsSinceLastRun``): the run records then go first, so that the
        // compacted journal still says so.
        var runs: [RunRecord] = []
        if let success = lastSuccess, success != lastRun { runs.append(success) }
        if let run = lastRun { runs.append(run) }
        let runsFirst = recordsSinceLastRun > 0
        if runsFirst { for run in runs { try add(.run(run)) } }
        try verified.forEachLiveInArenaOrder { offset in
            let keep = verified.withRecord(at: offset) { at -> Bool in
                let record = VerifiedIndex.RecordView(base: at)
                guard let entry = current(record.path) else { return true }
                return record.holds(size: entry.size, digests: entry.digests)
            }
            if keep { try add(.verified(verified.record(at: offset))) }
        }
        func isCurrent(_ identity: EntryIdentity) -> Bool {
            var path = identity.path
            return path.withUTF8 { current($0) }.map { EntryIdentity($0) == identity } ?? false
        }
        for (_, record) in partials where isCurrent(record.identity) { try add(.partial(record)) }
        for (_, record) in failures where isCurrent(record.identity) { try add(.failed(record)) }
        if !runsFirst { for run in runs { try add(.run(run)) } }
        try tmp.append(out)
        out = []
        try tmp.sync()
        CrashPoint.hit("compact-before-rename")
        if DiskChange.renameat(folder.fd, tmpName, folder.fd, Journal.fileName) != 0 {
            throw SystemError("replace", displayPath)
        }
        renamed = true
        try folder.sync()
        CrashPoint.hit("compact-after-rename")
        let newFd = DiskChange.openat(folder.fd, Journal.fileName, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC)
        if newFd < 0 { throw SystemError("open journal", displayPath) }
        let handle = FileDescriptor(fd: newFd, displayPath: displayPath)
        file = handle
        // The new file's content, read back: exactly what the next open would see. The old
        // records go first, so the two indexes are never held at once. Should the read fail, the
        // records held are a true part of the file, which is complete on disk: a lookup that
        // finds nothing only costs a hash.
        verified = VerifiedIndex()
        contentTable = nil
        partials = [:]
        failures = [:]
        lineCount = 0
        recordsSinceLastRun = 0
        length = Int64(try replay(handle).read)
        reserve.reset()
        reserve.keep(handle, length: length)
    }
}
