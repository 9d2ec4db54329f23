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

/// The crash-safe journal in `DEST/.mirror/journal` (guarantees: `journal.md`).
///
/// An append-only text file of checksummed records (``JournalRecord``). Opening it replays every
/// record; the first line whose checksum fails, or a last line without its newline, marks the torn
/// tail of a write a crash interrupted: it and everything after it are ignored and cut off
/// (`ftruncate`), so a damaged tail costs a little time and never a wrong file.
/// Appends come from the sync thread and the transfer thread, so they are serialised by a lock.
public final class Journal {
    public static let fileName = "journal"
    static let header = Array("mirror-journal 1\n".utf8)

    /// The latest records per path, as replayed and appended: three maps rather than one map of
    /// three optionals, because a large destination has a verified record for nearly every entry
    /// and hardly any partial or failed ones.
    private var verified: [String: VerifiedRecord] = [:]
    private var partials: [String: PartialRecord] = [:]
    private var failures: [String: FailedRecord] = [:]

    /// Every path the journal knows, with its records.
    public var entries: [String: EntryRecords] {
        lock.lock()
        defer { lock.unlock() }
        var out: [String: EntryRecords] = [:]
        for path in Set(verified.keys).union(partials.keys).union(failures.keys) {
            out[path] = EntryRecords(verified: verified[path], partial: partials[path], failed: failures[path])
        }
        return out
    }
    public private(set) var lastRun: RunRecord?
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
        if !readOnly { try SafePath.requireSoleRegularFile(fd, displayPath) }
        let bytes = try handle.readAll()
        let validLength = replay(bytes)
        if readOnly { return }
        file = handle
        if validLength < bytes.count || bytes.isEmpty {
            droppedTailBytes = bytes.count - validLength
            if validLength == 0 {
                try handle.truncate(to: 0)
                try handle.append(Journal.header)
            } else {
                try handle.truncate(to: Int64(validLength))
            }
            try handle.syncData()
        }
    }

    /// Applies every valid record of `bytes`; returns the length of the valid prefix.
    private func replay(_ bytes: [UInt8]) -> Int {
        guard bytes.starts(with: Journal.header) else { return 0 }
        var offset = Journal.header.count
        while offset < bytes.count {
            guard let newline = bytes[offset...].firstIndex(of: UInt8(ascii: "\n")),
                  let record = JournalRecord.decode(bytes[offset..<newline]) else { break }
            apply(record)
            lineCount += 1
            offset = newline + 1
        }
        return offset
    }

    private func apply(_ record: JournalRecord) {
        switch record {
        case .verified(let r):
            let path = r.identity.path
            verified[path] = r
            if !failures.isEmpty { failures.removeValue(forKey: path) }
            if !partials.isEmpty { partials.removeValue(forKey: path) }
        case .partial(let r):
            partials[r.identity.path] = r
        case .forget(let path):
            partials.removeValue(forKey: path)
        case .failed(let r):
            failures[r.identity.path] = r
        case .run(let r):
            lastRun = r
        }
    }

    public func records(for path: String) -> EntryRecords? {
        lock.lock()
        defer { lock.unlock() }
        let records = EntryRecords(verified: verified[path], partial: partials[path], failed: failures[path])
        return records.isEmpty ? nil : records
    }

    /// Appends `record`. With `durable`, `fdatasync`s the journal before returning, so the record
    /// survives a power cut; callers make the data it describes durable first (journal.md, rule 1).
    public func append(_ record: JournalRecord, durable: Bool) throws {
        lock.lock()
        defer { lock.unlock() }
        guard let file else { return }
        try file.append(record.encodedLine())
        apply(record)
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
    /// warrant. Keeps the journal's size proportional to the manifest (journal.md, rule 5).
    public func needsCompaction(liveEntries: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return lineCount > 4 * liveEntries + 256
    }

    /// Rewrites the journal with only the records still relevant: those whose identity matches
    /// `isCurrent` (an entry of the current manifest), and the last run.
    ///
    /// Atomic replacement: write `journal.tmp`, `fsync` it, `renameat` over `journal`, `fsync` the
    /// folder. A crash at any point leaves either the old or the new journal, both complete.
    public func compact(isCurrent: (EntryIdentity) -> Bool) throws {
        lock.lock()
        defer { lock.unlock() }
        guard file != nil else { return }
        var keptVerified: [String: VerifiedRecord] = [:]
        var keptPartials: [String: PartialRecord] = [:]
        var keptFailures: [String: FailedRecord] = [:]
        var out = Journal.header
        var lines = 0
        for path in Set(verified.keys).union(partials.keys).union(failures.keys).sorted() {
            if let v = verified[path], isCurrent(v.identity) { keptVerified[path] = v; out += JournalRecord.verified(v).encodedLine(); lines += 1 }
            if let p = partials[path], isCurrent(p.identity) { keptPartials[path] = p; out += JournalRecord.partial(p).encodedLine(); lines += 1 }
            if let f = failures[path], isCurrent(f.identity) { keptFailures[path] = f; out += JournalRecord.failed(f).encodedLine(); lines += 1 }
        }
        if let run = lastRun { out += JournalRecord.run(run).encodedLine(); lines += 1 }

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
        verified = keptVerified
        partials = keptPartials
        failures = keptFailures
        lineCount = lines
    }
}
