import CZlib

/// What identifies a manifest entry for the journal: a record made for another size or checksum is
/// obsolete (journal.md, rule 4), so it never vouches for a file the manifest now describes differently.
public struct EntryIdentity: Hashable, Sendable {
    public var path: String
    public var size: Int64
    public var sha256: String?
    public var sha512: String?

    public init(path: String, size: Int64, sha256: String?, sha512: String?) {
        self.path = path
        self.size = size
        self.sha256 = sha256
        self.sha512 = sha512
    }

    public init(_ entry: ManifestEntry) {
        self.init(path: entry.path, size: entry.size, sha256: entry.sha256?.hex, sha512: entry.sha512?.hex)
    }
}

/// One line of the journal.
///
/// On disk a record is one line: `CRC KIND key=value ...`, where CRC is zlib's `crc32` of the
/// rest of the line in 8 hex digits. Values are percent-encoded where they hold spaces, `=`, `%`
/// or control characters, so `grep`, `less` and `awk` read the journal as it is (journal.md, rule 6).
public enum JournalRecord: Equatable, Sendable {
    /// A verified file was installed at its path. Its `stat` identity lets a later run skip it.
    case verified(VerifiedRecord)
    /// A partial download: `bytes` of it are durable (fsynced before this record was written).
    case partial(PartialRecord)
    /// The partial file was discarded.
    case forget(path: String)
    /// The entry failed in the last run that tried it (for `mirror status`).
    case failed(FailedRecord)
    /// A run ended.
    case run(RunRecord)
}

public struct VerifiedRecord: Equatable, Sendable {
    public var identity: EntryIdentity
    public var inode: UInt64
    public var device: UInt64
    public var mtime: FileTime
    public var ctime: FileTime

    public init(identity: EntryIdentity, inode: UInt64, device: UInt64, mtime: FileTime, ctime: FileTime) {
        self.identity = identity
        self.inode = inode
        self.device = device
        self.mtime = mtime
        self.ctime = ctime
    }

    public init(identity: EntryIdentity, status: FileStatus) {
        self.init(identity: identity, inode: status.inode, device: status.device, mtime: status.mtime, ctime: status.ctime)
    }

    /// True when `status` is, by every cheap measure, the very file this record describes:
    /// same size, inode, device, modification time and change time. Any write, chmod, rename or
    /// replacement changes the ctime, so a match means nobody touched the file since it was verified.
    public func matches(_ status: FileStatus) -> Bool {
        status.isRegularFile && status.size == identity.size && status.inode == inode
            && status.device == device && status.mtime == mtime && status.ctime == ctime
    }
}

public struct PartialRecord: Equatable, Sendable {
    public var identity: EntryIdentity
    /// The URL the bytes came from (credentials masked).
    public var url: String
    /// The server's validator for those bytes: a strong ETag, else a Last-Modified date.
    public var validator: String?
    /// Bytes durable at the start of the partial file.
    public var bytes: Int64
    /// The hash states after exactly `bytes` bytes (``Hasher/exportState()``, hex), so a resume
    /// need not read the prefix again.
    public var sha256State: String?
    public var sha512State: String?

    public init(identity: EntryIdentity, url: String, validator: String?, bytes: Int64,
                sha256State: String? = nil, sha512State: String? = nil) {
        self.identity = identity
        self.url = url
        self.validator = validator
        self.bytes = bytes
        self.sha256State = sha256State
        self.sha512State = sha512State
    }
}

public struct FailedRecord: Equatable, Sendable {
    public var identity: EntryIdentity
    public var error: String
    public var time: Int64

    public init(identity: EntryIdentity, error: String, time: Int64) {
        self.identity = identity
        self.error = error
        self.time = time
    }
}

public struct RunRecord: Equatable, Sendable {
    public var start: Int64
    public var end: Int64
    public var result: String
    public var downloaded: Int
    public var failed: Int
    public var bytes: Int64

    public init(start: Int64, end: Int64, result: String, downloaded: Int, failed: Int, bytes: Int64) {
        self.start = start
        self.end = end
        self.result = result
        self.downloaded = downloaded
        self.failed = failed
        self.bytes = bytes
    }
}

// MARK: - Encoding

extension JournalRecord {
    /// The record as one line, checksum first, newline last.
    public func encodedLine() -> [UInt8] {
        var fields: [(String, String)] = []
        let kind: String
        func identity(_ id: EntryIdentity) {
            fields.append(("path", id.path))
            fields.append(("size", String(id.size)))
            if let s = id.sha256 { fields.append(("sha256", s)) }
            if let s = id.sha512 { fields.append(("sha512", s)) }
        }
        switch self {
        case .verified(let r):
            kind = "verified"
            identity(r.identity)
            fields += [("ino", String(r.inode)), ("dev", String(r.device)),
                       ("mtime", r.mtime.journalText), ("ctime", r.ctime.journalText)]
        case .partial(let r):
            kind = "partial"
            identity(r.identity)
            fields.append(("url", r.url))
            if let v = r.validator { fields.append(("validator", v)) }
            fields.append(("bytes", String(r.bytes)))
            if let s = r.sha256State { fields.append(("h256", s)) }
            if let s = r.sha512State { fields.append(("h512", s)) }
        case .forget(let path):
            kind = "forget"
            fields.append(("path", path))
        case .failed(let r):
            kind = "failed"
            identity(r.identity)
            fields += [("error", r.error), ("at", String(r.time))]
        case .run(let r):
            kind = "run"
            fields += [("start", String(r.start)), ("end", String(r.end)), ("result", r.result),
                       ("downloaded", String(r.downloaded)), ("failed", String(r.failed)), ("bytes", String(r.bytes))]
        }
        var body = Array(kind.utf8)
        for (key, value) in fields {
            body.append(UInt8(ascii: " "))
            body.append(contentsOf: key.utf8)
            body.append(UInt8(ascii: "="))
            JournalRecord.percentEncode(value, into: &body)
        }
        var line = Array(JournalRecord.hex8(JournalRecord.checksum(body)).utf8)
        line.append(UInt8(ascii: " "))
        line.append(contentsOf: body)
        line.append(UInt8(ascii: "\n"))
        return line
    }

    /// Decodes one line (without its newline). nil when the checksum does not match or a field is
    /// missing or malformed: the caller treats that as the torn end of the journal.
    public static func decode(_ line: ArraySlice<UInt8>) -> JournalRecord? {
        guard line.count > 10, line[line.startIndex + 8] == UInt8(ascii: " ") else { return nil }
        let crcText = String(decoding: line[line.startIndex..<line.startIndex + 8], as: UTF8.self)
        guard let crc = UInt32(crcText, radix: 16) else { return nil }
        let body = line[(line.startIndex + 9)...]
        guard checksum(body) == crc else { return nil }
        let parts = body.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard let kindBytes = parts.first else { return nil }
        var fields: [String: String] = [:]
        for part in parts.dropFirst() {
            guard let eq = part.firstIndex(of: UInt8(ascii: "=")) else { return nil }
            let key = String(decoding: part[part.startIndex..<eq], as: UTF8.self)
            guard let value = percentDecode(part[(eq + 1)...]) else { return nil }
            fields[key] = value
        }
        func identity() -> EntryIdentity? {
            guard let path = fields["path"], let size = fields["size"].flatMap({ Int64($0) }),
                  fields["sha256"] != nil || fields["sha512"] != nil else { return nil }
            return EntryIdentity(path: path, size: size, sha256: fields["sha256"], sha512: fields["sha512"])
        }
        func int(_ key: String) -> Int64? { fields[key].flatMap { Int64($0) } }
        switch String(decoding: kindBytes, as: UTF8.self) {
        case "verified":
            guard let id = identity(), let ino = fields["ino"].flatMap({ UInt64($0) }),
                  let dev = fields["dev"].flatMap({ UInt64($0) }),
                  let mtime = fields["mtime"].flatMap(FileTime.init(journalText:)),
                  let ctime = fields["ctime"].flatMap(FileTime.init(journalText:)) else { return nil }
            return .verified(VerifiedRecord(identity: id, inode: ino, device: dev, mtime: mtime, ctime: ctime))
        case "partial":
            guard let id = identity(), let url = fields["url"], let bytes = int("bytes") else { return nil }
            return .partial(PartialRecord(identity: id, url: url, validator: fields["validator"], bytes: bytes,
                                          sha256State: fields["h256"], sha512State: fields["h512"]))
        case "forget":
            guard let path = fields["path"] else { return nil }
            return .forget(path: path)
        case "failed":
            guard let id = identity(), let error = fields["error"], let at = int("at") else { return nil }
            return .failed(FailedRecord(identity: id, error: error, time: at))
        case "run":
            guard let start = int("start"), let end = int("end"), let result = fields["result"],
                  let downloaded = int("downloaded"), let failed = int("failed"), let bytes = int("bytes") else { return nil }
            return .run(RunRecord(start: start, end: end, result: result, downloaded: Int(downloaded), failed: Int(failed), bytes: bytes))
        default:
            return nil
        }
    }

    static func checksum<C: Collection>(_ bytes: C) -> UInt32 where C.Element == UInt8 {
        let value = bytes.withContiguousStorageIfAvailable { raw -> UInt in
            crc32(0, raw.baseAddress, UInt32(raw.count))
        } ?? Array(bytes).withUnsafeBufferPointer { crc32(0, $0.baseAddress, UInt32($0.count)) }
        return UInt32(truncatingIfNeeded: value)
    }

    static func hex8(_ value: UInt32) -> String {
        let s = String(value, radix: 16)
        return String(repeating: "0", count: 8 - s.count) + s
    }

    /// Keeps printable ASCII and UTF-8 as they are; encodes space, `%`, `=` and control bytes.
    static func percentEncode(_ value: String, into out: inout [UInt8]) {
        let digits = Array("0123456789ABCDEF".utf8)
        for b in value.utf8 {
            if b <= 0x20 || b == 0x7f || b == UInt8(ascii: "%") || b == UInt8(ascii: "=") {
                out.append(UInt8(ascii: "%"))
                out.append(digits[Int(b >> 4)])
                out.append(digits[Int(b & 0xf)])
            } else {
                out.append(b)
            }
        }
    }

    static func percentDecode(_ bytes: ArraySlice<UInt8>) -> String? {
        guard bytes.contains(UInt8(ascii: "%")) else { return String(decoding: bytes, as: UTF8.self) }
        var out = [UInt8]()
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.endIndex,
                      let v = UInt8(String(decoding: bytes[(i + 1)...(i + 2)], as: UTF8.self), radix: 16) else { return nil }
                out.append(v)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension FileTime {
    /// `SECONDS.NANOSECONDS` with nine fraction digits.
    var journalText: String {
        let ns = String(nanoseconds)
        return "\(seconds).\(String(repeating: "0", count: max(0, 9 - ns.count)))\(ns)"
    }

    init?(journalText: String) {
        let parts = journalText.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let s = Int64(parts[0]), let ns = Int64(parts[1]), parts[1].count == 9 else { return nil }
        self.init(seconds: s, nanoseconds: ns)
    }
}
