import CZlib
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Everything the journal says about one manifest path.
public struct EntryRecords: Sendable {
    public var verified: VerifiedRecord?
    public var partial: PartialRecord?
    public var failed: FailedRecord?

    var isEmpty: Bool { verified == nil && partial == nil && failed == nil }
}

/// The crash-safe journal in `DEST/.mirror/journal` (guarantees: `docs/journal.md`).
///
/// An append-only text file of checksummed records (``JournalRecord``). Opening it replays every
/// record; the first line whose checksum fails, or a last line without its newline, marks the torn
/// tail of a write a crash interrupted: it and everything after it are ignored and cut off
/// (`ftruncate`), so a damaged tail costs a little time and never a wrong file.
/// Appends come from the sync thread and the transfer thread, so they are serialised by a lock.
public final class Journal {
    public static let fileName = "journal"
    static let header = Array("mirror-journal 1\n".utf8)

    /// The latest records per path, as replayed and appended. A large destination has a verified
    /// record for nearly every entry and hardly any partial or failed ones, so verified records
    /// are not decoded up front: `verified` maps a hash of the path (as encoded in the line) to
    /// where its latest line starts in `text`, the journal's bytes kept as read. A lookup decodes
    /// that one line and checks its path. For 100,000 entries this is ~24 MB (the text and a
    /// small map) instead of ~55 MB of decoded records, and opening the journal only checks
    /// each line's CRC. Partial and failed records are few and kept decoded.
    private var text: [UInt8] = []
    private var verified: [UInt64: Int] = [:]
    /// Keyed by the path's bytes, never by `String` (canonical equality would merge two names).
    private var partials: [PathKey: PartialRecord] = [:]
    private var failures: [PathKey: FailedRecord] = [:]

    /// Every path the journal knows, with its records.
    public var entries: [PathKey: EntryRecords] {
        lock.lock()
        defer { lock.unlock() }
        var out: [PathKey: EntryRecords] = [:]
        for offset in verified.values {
            if case .verified(let r)? = decodeLine(at: offset) { out[PathKey(r.identity.path), default: EntryRecords()].verified = r }
        }
        for (path, r) in partials { out[path, default: EntryRecords()].partial = r }
        for (path, r) in failures { out[path, default: EntryRecords()].failed = r }
        return out
    }
    /// Paths with a verified record: the files mirror knows in DEST (``DeletionPolicy`` counts
    /// its percentage from them).
    public var verifiedCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return verified.count
    }
    public private(set) var lastRun: RunRecord?
    /// The last run that ended `ok` (every entry present and verified): "not in sync for 2 h" is
    /// measured from its end (issue 16, item 2). Kept by compaction beside ``lastRun``.
    public private(set) var lastSuccess: RunRecord?
    /// Bytes of a torn or corrupt tail that opening the journal found and dropped.
    public private(set) var droppedTailBytes = 0

    private let folder: FileDescriptor
    private let displayPath: String
    private var file: FileDescriptor?
    private var lineCount = 0
    private let lock = NSLock()

    /// Opens and replays the journal in `folder` (the `.mirror` folder).
    ///
    /// - Parameter readOnly: for `--dry-run` and `status`: read what is there, change nothing,
    ///   not even a torn tail.
    public init(folder: FileDescriptor, displayPath: String, readOnly: Bool) throws {
        self.folder = folder
        self.displayPath = displayPath
        let flags = readOnly ? O_RDONLY : (O_RDWR | O_CREAT | O_APPEND)
        let fd = openat(folder.fd, Journal.fileName, flags | O_NOFOLLOW | O_CLOEXEC, 0o644)
        if fd < 0 {
            if readOnly && errno == ENOENT { return }
            throw SystemError("open journal", displayPath)
        }
        let handle = FileDescriptor(fd: fd, displayPath: displayPath)
        if !readOnly {
            try SafePath.requireSoleRegularFile(fd, displayPath)
            try StateOwnership.require(handle, displayPath)
        }
        text = try handle.readAll()
        let readLength = text.count
        let validLength = replay()
        if readOnly { return }
        file = handle
        if validLength < readLength || readLength == 0 {
            droppedTailBytes = readLength - validLength
            if validLength == 0 {
                try handle.truncate(to: 0)
                try handle.append(Journal.header)
            } else {
                try handle.truncate(to: Int64(validLength))
            }
            try handle.syncData()
        }
    }

    /// Applies every valid record of `text`, cuts `text` to its valid prefix (with the header, or
    /// empty when there is none) and returns that prefix's length.
    private func replay() -> Int {
        guard text.starts(with: Journal.header) else {
            text = Journal.header
            return 0
        }
        // Verified records dominate and are ~200 bytes each: size the map once instead of
        // growing (and rehashing) it step by step over 100,000 records.
        verified.reserveCapacity(text.count / 192)
        let valid = text.withUnsafeBufferPointer { buf -> Int in
            guard let base = buf.baseAddress else { return 0 }
            var offset = Journal.header.count
            while offset < buf.count {
                guard let found = memchr(base + offset, 0x0a, buf.count - offset) else { break }
                let newline = UnsafeRawPointer(base).distance(to: UnsafeRawPointer(found))
                // A verified line is only checked (CRC, kind, path) now and decoded when looked up.
                switch JournalRecord.scanVerifiedLine(buf, from: offset, to: newline) {
                case .verified(let path):
                    noteVerified(encodedPath: UnsafeBufferPointer(rebasing: buf[path]), at: offset)
                case .corrupt:
                    return offset
                case .other:
                    guard let record = JournalRecord.decode(ArraySlice(UnsafeBufferPointer(rebasing: buf[offset..<newline]))) else {
                        return offset
                    }
                    apply(record)
                }
                lineCount += 1
                offset = newline + 1
            }
            return offset
        }
        if valid < text.count { text.removeSubrange(valid...) }
        return valid
    }

    /// FNV-1a over the path as the journal line spells it (percent-encoded), so a lookup encodes
    /// the path the same way. Two paths with one hash only cost a re-hash of a file: a lookup
    /// decodes the line and compares the path itself.
    static func pathKey<C: Collection>(_ encoded: C) -> UInt64 where C.Element == UInt8 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in encoded {
            h ^= UInt64(b)
            h = h &* 0x0000_0100_0000_01b3
        }
        return h
    }

    static func pathKey(_ path: String) -> UInt64 {
        // The same as hashing JournalRecord.percentEncode's output, without the array.
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        JournalRecord.forEachEncodedByte(of: path) { b in
            h ^= UInt64(b)
            h = h &* 0x0000_0100_0000_01b3
        }
        return h
    }

    private func noteVerified(encodedPath: UnsafeBufferPointer<UInt8>, at offset: Int) {
        verified[Journal.pathKey(encodedPath)] = offset
        if !failures.isEmpty || !partials.isEmpty, let path = JournalRecord.percentDecode(ArraySlice(encodedPath)) {
            failures.removeValue(forKey: PathKey(path))
            partials.removeValue(forKey: PathKey(path))
        }
    }

    /// The record of the line starting at `offset` in `text`.
    private func decodeLine(at offset: Int) -> JournalRecord? {
        guard offset < text.count, let newline = text[offset...].firstIndex(of: UInt8(ascii: "\n")) else { return nil }
        return JournalRecord.decode(text[offset..<newline])
    }

    /// True when the journal's latest verified record for `entry` describes exactly this entry
    /// and this file, by one `stat` (`status`): the no-op fast path, checked on the line's bytes
    /// without decoding it into a record.
    public func isVerified(_ entry: ManifestEntry, status: FileStatus) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard let offset = verified[Journal.pathKey(entry.path)] else { return false }
        return text.withUnsafeBufferPointer { buffer in
            JournalRecord.verifiedLineMatches(buffer, at: offset, path: entry.path, size: entry.size,
                                              digests: entry.digests, status: status)
        }
    }

    private func verifiedRecord(for path: String) -> VerifiedRecord? {
        guard let offset = verified[Journal.pathKey(path)], case .verified(let r)? = decodeLine(at: offset),
              r.identity.path.utf8.elementsEqual(path.utf8) else { return nil }
        return r
    }

    /// Applies a record other than `verified`, or one appended now (whose line ends `text`).
    private func apply(_ record: JournalRecord, lineStart: Int? = nil) {
        switch record {
        case .verified(let r):
            let path = PathKey(r.identity.path)
            if let lineStart { verified[Journal.pathKey(r.identity.path)] = lineStart }
            if !failures.isEmpty { failures.removeValue(forKey: path) }
            if !partials.isEmpty { partials.removeValue(forKey: path) }
        case .partial(let r):
            partials[PathKey(r.identity.path)] = r
        case .forget(let path):
            partials.removeValue(forKey: PathKey(path))
        case .removed(let path):
            partials.removeValue(forKey: PathKey(path))
            failures.removeValue(forKey: PathKey(path))
            // Only this path's line: another path may share the hash (a lookup compares paths too).
            if verifiedRecord(for: path) != nil { verified.removeValue(forKey: Journal.pathKey(path)) }
        case .failed(let r):
            failures[PathKey(r.identity.path)] = r
        case .run(let r):
            lastRun = r
            if r.succeeded { lastSuccess = r }
        }
    }

    /// The partial record for `path`, without decoding its verified record (``records(for:)`` does).
    public func partialRecord(for path: String) -> PartialRecord? {
        lock.lock()
        defer { lock.unlock() }
        return partials[PathKey(path)]
    }

    public func records(for path: String) -> EntryRecords? {
        lock.lock()
        defer { lock.unlock() }
        let key = PathKey(path)
        let records = EntryRecords(verified: verifiedRecord(for: path), partial: partials[key], failed: failures[key])
        return records.isEmpty ? nil : records
    }

    /// Appends `record`. With `durable`, `fdatasync`s the journal before returning, so the record
    /// survives a power cut; callers make the data it describes durable first (docs/journal.md, rule 1).
    public func append(_ record: JournalRecord, durable: Bool) throws {
        lock.lock()
        defer { lock.unlock() }
        guard let file else { return }
        let line = record.encodedLine()
        try file.append(line)
        let lineStart = text.count
        if case .verified = record { text += line }
        apply(record, lineStart: lineStart)
        lineCount += 1
        if durable { try file.syncData() }
    }

    /// Makes every appended record durable.
    public func sync() throws {
        lock.lock()
        defer { lock.unlock() }
        try file?.syncData()
    }

    /// True when rewriting would shrink the journal noticeably: more lines than live records
    /// warrant. Keeps the journal's size proportional to the manifest (docs/journal.md, rule 5).
    /// Paths the journal still knows but the manifest no longer lists are live too: their verified
    /// records are kept for `--delete` (``compact(isCurrent:isListed:)``).
    public func needsCompaction(liveEntries: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return lineCount > 4 * max(liveEntries, verified.count + partials.count) + 256
    }

    /// Rewrites the journal with only the records still relevant: those whose identity matches
    /// `isCurrent` (an entry of the current manifest), the verified records of paths the manifest
    /// no longer lists (`isListed` false: files an earlier run installed, which `--delete` may
    /// remove later; docs/journal.md, "Compaction"), and the last run.
    ///
    /// Atomic replacement: write `journal.tmp`, `fsync` it, `renameat` over `journal`, `fsync` the
    /// folder. A crash at any point leaves either the old or the new journal, both complete.
    public func compact(isCurrent: (EntryIdentity) -> Bool, isListed: (PathKey) -> Bool) throws {
        lock.lock()
        defer { lock.unlock() }
        guard file != nil else { return }
        var latestVerified: [PathKey: VerifiedRecord] = [:]
        for offset in verified.values {
            if case .verified(let r)? = decodeLine(at: offset) { latestVerified[PathKey(r.identity.path)] = r }
        }
        var out = Journal.header
        for path in Set(latestVerified.keys).union(partials.keys).union(failures.keys).sorted() {
            if let v = latestVerified[path], isCurrent(v.identity) || !isListed(path) { out += JournalRecord.verified(v).encodedLine() }
            if let p = partials[path], isCurrent(p.identity) { out += JournalRecord.partial(p).encodedLine() }
            if let f = failures[path], isCurrent(f.identity) { out += JournalRecord.failed(f).encodedLine() }
        }
        latestVerified = [:]
        if let success = lastSuccess, success != lastRun { out += JournalRecord.run(success).encodedLine() }
        if let run = lastRun { out += JournalRecord.run(run).encodedLine() }

        let tmpName = Journal.fileName + ".tmp"
        // A new file (O_EXCL after removing any leftover): a link planted at journal.tmp is
        // removed, never truncated or written through.
        if unlinkat(folder.fd, tmpName, 0) != 0 && errno != ENOENT { throw SystemError("remove", displayPath + ".tmp") }
        let fd = SafePath.open(tmpName, beneath: folder.fd, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o644)
        if fd < 0 { throw SystemError("write", displayPath + ".tmp") }
        let tmp = FileDescriptor(fd: fd, displayPath: displayPath + ".tmp")
        try tmp.append(out)
        try tmp.sync()
        tmp.close()
        CrashPoint.hit("compact-before-rename")
        if renameat(folder.fd, tmpName, folder.fd, Journal.fileName) != 0 {
            throw SystemError("replace", displayPath)
        }
        try folder.sync()
        CrashPoint.hit("compact-after-rename")
        let newFd = openat(folder.fd, Journal.fileName, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC)
        if newFd < 0 { throw SystemError("open journal", displayPath) }
        file = FileDescriptor(fd: newFd, displayPath: displayPath)
        // The new file's content, replayed: exactly what the next open would see.
        text = out
        verified = [:]
        partials = [:]
        failures = [:]
        lineCount = 0
        _ = replay()
    }
}
