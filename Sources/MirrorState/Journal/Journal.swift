import CZlib
import MirrorFS
import MirrorKit
import MirrorModel
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
/// Records are appended only through the run's ``JournalWriter``, which several threads hand
/// records to (docs/architecture.md, "Threads"), so appends are serialised by a lock.
///
/// Sendable, unchecked: every read and write of its records and its file is under ``lock`` (a
/// ``ReadWriteLock``: lookups together, appends and compaction alone), but in `init`, which
/// replays the file before any other thread has the journal. Not ``Locked``: its lookups, once
/// per manifest entry from a thread per core, would then queue behind each other.
public final class Journal: @unchecked Sendable {
    public static let fileName = "journal"
    static let header = Array("mirror-journal 1\n".utf8)

    /// The latest records per path, as replayed and appended. A large destination has a verified
    /// record for nearly every entry and hardly any partial or failed ones, so verified records
    /// are packed (``VerifiedIndex``: ~95 bytes for a record whose line is ~200) and decoded only
    /// when asked for; the file itself is read in chunks and never held whole (10^6 entries:
    /// ~110 MB instead of 230 MB for the lines and a map to them). Partial and failed records are
    /// few and kept decoded.
    var verified = VerifiedIndex()
    /// ``verifiedRecords(withContent:)``'s table of `verified`, made at its first question.
    var contentTable: VerifiedIndex.ContentTable?
    /// Content questions answered so far by a pass over the records (``verifiedRecords(size:digests:)``).
    var contentScans = 0
    /// Keyed by the path's bytes, never by `String` (canonical equality would merge two names).
    var partials: [PathKey: PartialRecord] = [:]
    var failures: [PathKey: FailedRecord] = [:]

    /// Every path the journal knows, with its records. Decodes every record (about 1.2 KB each
    /// in memory): for tests and small journals, never on a run's path.
    public var entries: [PathKey: EntryRecords] {
        lock.lockForReading()
        defer { lock.unlock() }
        var out: [PathKey: EntryRecords] = [:]
        verified.forEach { r in out[PathKey(r.identity.path), default: EntryRecords()].verified = r }
        for (path, r) in partials { out[path, default: EntryRecords()].partial = r }
        for (path, r) in failures { out[path, default: EntryRecords()].failed = r }
        return out
    }
    /// The verified records (latest when the table was made) whose size and digests hash to
    /// `content`: the caller compares them exactly. The table is made at the first question,
    /// 16 bytes a record; records appended since are not in it (`ContentIndex` keeps the run's
    /// own installs) until the table is made again: after the index repacked its records, whose
    /// places the table holds, and after compaction rebuilt them.
    package func verifiedRecords(withContent content: ContentHash) -> [VerifiedRecord] {
        lock.lock()
        defer { lock.unlock() }
        // A table made before the arena was repacked points at old places (``VerifiedIndex/repack()``).
        if contentTable?.repacks != verified.repacks { contentTable = verified.contentTable() }
        return contentTable?.offsets(for: content).map { verified.record(at: $0) } ?? []
    }

    /// The verified records of exactly this size and these digests (reuse by content,
    /// `ContentIndex`). The first ``scansBeforeTable`` questions are answered by a pass over the
    /// records (``VerifiedIndex/records(holding:digests:)``), the later ones by the content table
    /// (``verifiedRecords(withContent:)``), made at the first of them: a run that fetches a file
    /// or two of 10^6 (an atomic publish of one changed file) then never holds the table's 16 MB,
    /// and one that fetches many pays a few passes before it.
    package func verifiedRecords(size: Int64, digests: DigestSet) -> [VerifiedRecord] {
        lock.lock()
        if contentScans < Journal.scansBeforeTable {
            contentScans += 1
            defer { lock.unlock() }
            return verified.records(holding: size, digests: digests)
        }
        lock.unlock()
        return verifiedRecords(withContent: ContentHash(size: size, digests: digests))
    }

    /// Questions ``verifiedRecords(size:digests:)`` answers by a pass over the records.
    static let scansBeforeTable = 8

    /// The latest verified records whose packed form `keep` picks, decoded (only those: see
    /// ``VerifiedIndex/records(where:)``), in no particular order.
    package func verifiedRecords(where keep: (VerifiedIndex.RecordView) -> Bool) -> [VerifiedRecord] {
        lock.lockForReading()
        defer { lock.unlock() }
        return verified.records(where: keep)
    }

    /// Paths with a verified record: the files mirror knows in DEST (`DeletionPolicy` counts
    /// its percentage from them).
    public var verifiedCount: Int {
        lock.lockForReading()
        defer { lock.unlock() }
        return verified.count
    }
    public private(set) var lastRun: RunRecord?
    /// The last run that ended `ok` (every entry present and verified): "not in sync for 2 h" is
    /// measured from its end (docs/cli.md, "mirror status"). Kept by compaction beside ``lastRun``.
    public private(set) var lastSuccess: RunRecord?
    /// Records after the last `run` record: a run that was killed (or is running) wrote them. Zero
    /// means DEST's files are as the last run that ended left them, as far as the journal knows.
    public internal(set) var recordsSinceLastRun = 0
    /// Bytes of a torn or corrupt tail that opening the journal found and dropped.
    public private(set) var droppedTailBytes = 0

    let folder: FileDescriptor
    let displayPath: String
    var file: FileDescriptor?
    var lineCount = 0
    /// The file's length as this journal wrote it, and the free space kept past it.
    var length: Int64 = 0
    var reserve = JournalReserve()
    /// Lookups read together; appends and compaction write alone (``ReadWriteLock``).
    let lock = ReadWriteLock()

    /// Opens and replays the journal in `folder` (the `.mirror` folder).
    ///
    /// - Parameter readOnly: for `--dry-run` and `status`: read what is there, change nothing,
    ///   not even a torn tail.
    public init(folder: FileDescriptor, displayPath: String, readOnly: Bool) throws {
        self.folder = folder
        self.displayPath = displayPath
        let flags = readOnly ? O_RDONLY : (O_RDWR | O_CREAT | O_APPEND)
        let fd = DiskChange.openat(folder.fd, Journal.fileName, flags | O_NOFOLLOW | O_CLOEXEC, 0o644)
        if fd < 0 {
            if readOnly && errno == ENOENT { return }
            throw SystemError("open journal", displayPath)
        }
        let handle = FileDescriptor(fd: fd, displayPath: displayPath)
        if !readOnly {
            try SafePath.requireSoleRegularFile(fd, displayPath)
            try StateOwnership.require(handle, displayPath)
        }
        let (readLength, validLength) = try replay(handle)
        if readOnly { return }
        file = handle
        length = Int64(readLength)
        if validLength < readLength || readLength == 0 {
            droppedTailBytes = readLength - validLength
            if validLength == 0 {
                try handle.truncate(to: 0)
                try handle.append(Journal.header)
                length = Int64(Journal.header.count)
            } else {
                try handle.truncate(to: Int64(validLength))
                length = Int64(validLength)
            }
            try handle.syncData()
        }
        reserve.keep(handle, length: length)
    }

    /// Applies every valid record of the file, read in chunks of a few MB; returns the file's
    /// length and that of its valid prefix (with the header; 0 when there is none).
    func replay(_ handle: FileDescriptor) throws -> (read: Int, valid: Int) {
        let fileSize = Int(max(0, try handle.stat().size))
        // A verified line is ~200 bytes and its packed record about half: room for all of them
        // at once (reserved, untouched memory is never resident).
        verified.reserve(additional: fileSize / 192, bytesEach: 112)
        var buffer = [UInt8](repeating: 0, count: min(max(fileSize, 1 << 12), 4 << 20))
        var filled = 0      // bytes in `buffer`
        var consumed = 0    // bytes of the file before `buffer`
        var sawHeader = false
        while true {
            if filled == buffer.count { buffer += [UInt8](repeating: 0, count: buffer.count) }  // a line longer than the buffer
            let n = try buffer.withUnsafeMutableBytes { raw in
                try handle.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[filled...]), at: Int64(consumed + filled))
            }
            let atEnd = n == 0
            filled += n
            if !sawHeader {
                if filled < Journal.header.count && !atEnd { continue }
                guard buffer[..<filled].starts(with: Journal.header) else { return (max(fileSize, filled), 0) }
                sawHeader = true
                buffer.withUnsafeMutableBytes { raw in
                    guard let base = raw.baseAddress else { return }
                    memmove(base, base + Journal.header.count, filled - Journal.header.count)
                }
                filled -= Journal.header.count
                consumed = Journal.header.count
            }
            let (used, stopped) = buffer.withUnsafeBufferPointer { replayLines(UnsafeBufferPointer(rebasing: $0[..<filled])) }
            if stopped || atEnd { return (max(fileSize, consumed + filled), consumed + used) }
            // The incomplete last line moves to the front; the next read completes it.
            buffer.withUnsafeMutableBytes { raw in
                guard let base = raw.baseAddress else { return }
                memmove(base, base + used, filled - used)
            }
            consumed += used
            filled -= used
        }
    }

    /// Applies the complete lines of `buf` up to the first damaged one; returns the length of the
    /// lines applied and whether a damaged line stopped it.
    private func replayLines(_ buf: UnsafeBufferPointer<UInt8>) -> (Int, Bool) {
        guard let base = buf.baseAddress else { return (0, false) }
        var offset = 0
        while offset < buf.count {
            guard let found = memchr(base + offset, 0x0a, buf.count - offset) else { break }
            let newline = UnsafeRawPointer(base).distance(to: UnsafeRawPointer(found))
            switch JournalRecord.scanVerifiedLine(buf, from: offset, to: newline) {
            case .verified(let line):
                noteVerified(line, in: buf)
                recordsSinceLastRun += 1
            case .corrupt:
                return (offset, true)
            case .other:
                guard let record = JournalRecord.decode(ArraySlice(UnsafeBufferPointer(rebasing: buf[offset..<newline]))) else {
                    return (offset, true)
                }
                apply(record)
            }
            lineCount += 1
            offset = newline + 1
        }
        return (offset, false)
    }

    /// A verified line with a good CRC: it replaces the path's record, or, when it is not a
    /// record ``JournalRecord/decode(_:)`` would make, leaves the path with none (as a lookup of
    /// the line itself found none).
    private func noteVerified(_ line: JournalRecord.VerifiedLine, in buf: UnsafeBufferPointer<UInt8>) {
        let encoded = UnsafeBufferPointer(rebasing: buf[line.path])
        var decoded: [UInt8]?
        if encoded.contains(0x25) {
            guard let bytes = JournalRecord.percentDecodeBytes(ArraySlice(encoded)) else { return }
            decoded = bytes
        }
        func withPath<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
            decoded.map { $0.withUnsafeBufferPointer(body) } ?? body(encoded)
        }
        withPath { path in
            if line.isComplete, let size = line.size, let inode = line.inode, let device = line.device,
               let mtime = line.mtime, let ctime = line.ctime {
                verified.insert(path: path, size: size, inode: UInt64(bitPattern: inode), device: UInt64(bitPattern: device),
                                mtime: mtime, ctime: ctime, adopted: line.found == 1,
                                digests: line.digests.mapValues { UnsafeBufferPointer(rebasing: buf[$0]) }, percentEncoded: true)
            } else {
                verified.remove(path: path)
            }
        }
        if !failures.isEmpty || !partials.isEmpty {
            let key = PathKey(bytes: withPath { Array($0) })
            failures.removeValue(forKey: key)
            partials.removeValue(forKey: key)
        }
    }

    /// True when the journal's latest verified record for `entry` describes exactly this entry
    /// and this file, by one `stat` (`status`): the no-op fast path, checked on the line's bytes
    /// without decoding it into a record. A moved change time is allowed where ``ChangeTimeTrust``
    /// allows it.
    public func isVerified(_ entry: ManifestEntry, status: FileStatus) -> Bool {
        let moved = ChangeTimeTrust.current.trustsMovedChangeTime(status)
        lock.lockForReading()
        defer { lock.unlock() }
        return entry.pathBytes.withBytes {
            verified.matches(path: $0, size: entry.size, digests: entry.digests, status: status, movedChangeTime: moved)
        }
    }

    private func verifiedRecord(for path: String) -> VerifiedRecord? {
        var path = path
        return path.withUTF8 { verified.record(for: $0) }
    }

    /// Applies a record read (other than a `verified` line the usual way) or appended now.
    func apply(_ record: JournalRecord) {
        if case .run = record { recordsSinceLastRun = 0 } else { recordsSinceLastRun += 1 }
        switch record {
        case .verified(let r):
            let path = PathKey(r.identity.path)
            verified.insert(r)
            if !failures.isEmpty { failures.removeValue(forKey: path) }
            if !partials.isEmpty { partials.removeValue(forKey: path) }
        case .partial(let r):
            partials[PathKey(r.identity.path)] = r
        case .forget(let path):
            partials.removeValue(forKey: PathKey(path))
        case .removed(let path):
            partials.removeValue(forKey: PathKey(path))
            failures.removeValue(forKey: PathKey(path))
            var bytes = path
            bytes.withUTF8 { verified.remove(path: $0) }
        case .failed(let r):
            failures[PathKey(r.identity.path)] = r
        case .run(let r):
            lastRun = r
            if r.succeeded { lastSuccess = r }
        }
    }

    /// The partial record for `path`, without decoding its verified record (``records(for:)`` does).
    public func partialRecord(for path: String) -> PartialRecord? {
        lock.lockForReading()
        defer { lock.unlock() }
        return partials[PathKey(path)]
    }

    public func records(for path: String) -> EntryRecords? {
        lock.lockForReading()
        defer { lock.unlock() }
        let key = PathKey(path)
        let records = EntryRecords(verified: verifiedRecord(for: path), partial: partials[key], failed: failures[key])
        return records.isEmpty ? nil : records
    }

    /// Room in memory for `count` more verified records: the files a run is about to fetch
    /// (``VerifiedIndex/reserve(additional:bytesEach:)``; reserved memory never written is never
    /// resident).
    public func reserveVerified(additional count: Int) {
        lock.lock()
        defer { lock.unlock() }
        verified.reserve(additional: count, bytesEach: 112)
    }

    /// True when the journal's dead weight (superseded records) passes half its live records
    /// (docs/journal.md, rule 5). Every run reads the whole journal, so a no-op pays for dead
    /// lines every time, while a compaction writes the live ones once: at this bound a journal is
    /// never more than 1.5 × its compacted size, and each compaction is paid for by at least half
    /// as many dead lines as it writes. Paths the journal still knows but the manifest no longer
    /// lists are live too: their verified records are kept for `--delete` (``compact(current:)``).
    public func needsCompaction(liveEntries: Int) -> Bool {
        lock.lockForReading()
        defer { lock.unlock() }
        let live = max(liveEntries, verified.count + partials.count)
        return lineCount > live + live / 2 + 256
    }
}
