import CZlib

/// What identifies a manifest entry for the journal: a record made for another size or checksum is
/// obsolete (docs/journal.md, rule 4), so it never vouches for a file the manifest now describes differently.
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

    /// Paths compare as bytes: Swift's `String ==` is canonical equivalence, under which `café`
    /// spelled NFC and NFD are one path, though they are two files on Linux.
    public static func == (a: EntryIdentity, b: EntryIdentity) -> Bool {
        a.size == b.size && a.sha256 == b.sha256 && a.sha512 == b.sha512 && a.path.utf8.elementsEqual(b.path.utf8)
    }

    public func hash(into hasher: inout Swift.Hasher) {
        hasher.combine(PathKey(path))
        hasher.combine(size)
    }
}

/// A path as its bytes, for dictionary keys and comparisons (docs/journal.md: paths are bytes).
/// A `String` key would merge the NFC and NFD spellings of one name, which are two files here.
public struct PathKey: Hashable, Sendable, Comparable {
    public let bytes: [UInt8]

    public init(_ path: String) { bytes = Array(path.utf8) }

    public var path: String { String(decoding: bytes, as: UTF8.self) }

    public static func < (a: PathKey, b: PathKey) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }
}

/// One line of the journal.
///
/// On disk a record is one line: `CRC KIND key=value ...`, where CRC is zlib's `crc32` of the
/// rest of the line in 8 hex digits. Values are percent-encoded where they hold spaces, `=`, `%`
/// or control characters, so `grep`, `less` and `awk` read the journal as it is (docs/journal.md, rule 6).
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
    /// Bytes durable at the start of the partial file. For a segmented download: the prefix the
    /// hash states describe (every byte of it lies in a segment's durable part).
    public var bytes: Int64
    /// The hash states after exactly `bytes` bytes (``Hasher/exportState()``, hex), so a resume
    /// need not read the prefix again.
    public var sha256State: String?
    public var sha512State: String?
    /// A segmented download (docs/journal.md, rule 3: "bytes durable per segment when segmented"): each
    /// segment's range and how much of it, from its start, is durable. nil for one stream.
    public var segments: [SegmentRecord]?
    /// The partial file these bytes are in: its inode and change time, taken (`fstat`) before the
    /// `fdatasync` that made them durable. The saved hash states are only ever restored over that
    /// very file, unchanged since (``PartialFile``; docs/journal.md, "Partial records"): a record is
    /// bound to one file, never to a path alone. nil in records of older versions: their states
    /// are never trusted, the prefix is hashed again.
    public var fileInode: UInt64?
    public var fileChangeTime: FileTime?

    public init(identity: EntryIdentity, url: String, validator: String?, bytes: Int64,
                sha256State: String? = nil, sha512State: String? = nil, segments: [SegmentRecord]? = nil,
                fileInode: UInt64? = nil, fileChangeTime: FileTime? = nil) {
        self.identity = identity
        self.url = url
        self.validator = validator
        self.bytes = bytes
        self.sha256State = sha256State
        self.sha512State = sha512State
        self.segments = segments
        self.fileInode = fileInode
        self.fileChangeTime = fileChangeTime
    }

    /// Whether `status` is the partial file this record was written for, unchanged since, and
    /// nobody else's to change: a regular file with one name, owned by `owner` (this process's
    /// effective uid), mode 0600, same inode and change time. A write, truncate, chmod, chown or
    /// rename by anyone moves the change time, and only root can set it back.
    public func describes(_ status: FileStatus, owner: UInt32) -> Bool {
        guard let fileInode, let fileChangeTime else { return false }
        return status.isRegularFile && status.links == 1 && status.owner == owner && status.permissions == 0o600
            && status.inode == fileInode && status.ctime == fileChangeTime
    }

    /// Durable bytes in all: the prefix, or the sum of the segments' durable parts.
    public var durableBytes: Int64 {
        guard let segments else { return bytes }
        return segments.reduce(0) { $0 + $1.done }
    }
}

/// One segment of a segmented download: bytes `[start, end)` of the file, of which `[start, start + done)`
/// are durable. Written in the journal as `START:END:DONE`, segments separated by commas.
public struct SegmentRecord: Equatable, Sendable {
    public var start: Int64
    public var end: Int64
    public var done: Int64

    public init(start: Int64, end: Int64, done: Int64) {
        self.start = start
        self.end = end
        self.done = done
    }

    /// The segments of a `segs=` value, or nil when it is malformed: together they must cover
    /// `[0, size)` in order, each starting where the previous one ended, with `done` within its length.
    static func parseList(_ text: String, size: Int64) -> [SegmentRecord]? {
        var out: [SegmentRecord] = []
        var previousEnd: Int64 = 0
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = item.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 3, let start = Int64(parts[0]), let end = Int64(parts[1]), let done = Int64(parts[2]),
                  start == previousEnd, start < end, end <= size, done >= 0, done <= end - start else { return nil }
            out.append(SegmentRecord(start: start, end: end, done: done))
            previousEnd = end
        }
        return out.isEmpty || previousEnd != size ? nil : out
    }

    static func listText(_ segments: [SegmentRecord]) -> String {
        segments.map { "\($0.start):\($0.end):\($0.done)" }.joined(separator: ",")
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
            if let segments = r.segments { fields.append(("segs", SegmentRecord.listText(segments))) }
            if let ino = r.fileInode, let ctime = r.fileChangeTime {
                fields += [("ino", String(ino)), ("ctime", ctime.journalText)]
            }
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
    ///
    /// A byte scanner: a no-op run replays one record per manifest entry (100,000 lines for a large
    /// manifest), so only the values kept become Strings, and numbers are parsed from the bytes.
    public static func decode(_ line: ArraySlice<UInt8>) -> JournalRecord? {
        let start = line.startIndex
        guard line.count > 10, line[start + 8] == UInt8(ascii: " "), let crc = parseHex32(line[start..<start + 8]) else { return nil }
        let body = line[(start + 9)...]
        guard checksum(body) == crc else { return nil }
        let kindEnd = body.firstIndex(of: UInt8(ascii: " ")) ?? body.endIndex
        let kind = body[body.startIndex..<kindEnd]
        var f = Fields()
        var i = kindEnd
        while i < body.endIndex {
            i += 1
            let fieldEnd = body[i...].firstIndex(of: UInt8(ascii: " ")) ?? body.endIndex
            guard let eq = body[i..<fieldEnd].firstIndex(of: UInt8(ascii: "=")) else { return nil }
            f.set(body[i..<eq], body[(eq + 1)..<fieldEnd])
            i = fieldEnd
        }
        func identity() -> EntryIdentity? {
            guard let path = f.string(f.path), let size = f.int(f.size), f.sha256 != nil || f.sha512 != nil else { return nil }
            return EntryIdentity(path: path, size: size, sha256: f.string(f.sha256), sha512: f.string(f.sha512))
        }
        switch kind.count {
        case 8 where kind.elementsEqual("verified".utf8):
            guard let id = identity(), let ino = f.int(f.ino), let dev = f.int(f.dev),
                  let mtime = f.time(f.mtime), let ctime = f.time(f.ctime) else { return nil }
            return .verified(VerifiedRecord(identity: id, inode: UInt64(bitPattern: ino), device: UInt64(bitPattern: dev), mtime: mtime, ctime: ctime))
        case 7 where kind.elementsEqual("partial".utf8):
            guard let id = identity(), let url = f.string(f.url), let bytes = f.int(f.bytes) else { return nil }
            var segments: [SegmentRecord]?
            if let text = f.string(f.segs) {
                guard let list = SegmentRecord.parseList(text, size: id.size) else { return nil }
                segments = list
            }
            return .partial(PartialRecord(identity: id, url: url, validator: f.string(f.validator), bytes: bytes,
                                          sha256State: f.string(f.h256), sha512State: f.string(f.h512), segments: segments,
                                          fileInode: f.int(f.ino).map { UInt64(bitPattern: $0) }, fileChangeTime: f.time(f.ctime)))
        case 6 where kind.elementsEqual("forget".utf8):
            guard let path = f.string(f.path) else { return nil }
            return .forget(path: path)
        case 6 where kind.elementsEqual("failed".utf8):
            guard let id = identity(), let error = f.string(f.error), let at = f.int(f.at) else { return nil }
            return .failed(FailedRecord(identity: id, error: error, time: at))
        case 3 where kind.elementsEqual("run".utf8):
            guard let start = f.int(f.start), let end = f.int(f.end), let result = f.string(f.result),
                  let downloaded = f.int(f.downloaded), let failed = f.int(f.failed), let bytes = f.int(f.bytes) else { return nil }
            return .run(RunRecord(start: start, end: end, result: result, downloaded: Int(downloaded), failed: Int(failed), bytes: bytes))
        default:
            return nil
        }
    }

    /// Whether the line starting at `start` in `buf` is a verified record for exactly this entry
    /// (path, size, digests) and this file (`status`: size, inode, device, mtime, ctime), decided
    /// on the bytes without making a String or an array: the no-op path runs this once per
    /// manifest entry (100,000 times for a large manifest). The line's CRC was checked when the
    /// journal was opened (or it was appended by this run). Fields are read in the order
    /// ``encodedLine()`` writes them; a line of any other shape does not match, and the caller
    /// takes the full path.
    static func verifiedLineMatches(_ buf: UnsafeBufferPointer<UInt8>, at start: Int, path: String, size: Int64,
                                    sha256: Digest?, sha512: Digest?, status: FileStatus) -> Bool {
        guard status.isRegularFile, status.size == size else { return false }
        let end = buf.count
        var i = start + 8
        let prefix = verifiedPrefix
        guard i + prefix.count < end else { return false }
        for k in 0..<prefix.count where buf[i + k] != prefix[k] { return false }
        i += prefix.count
        // The path, percent-encoded as percentEncode writes it.
        let upper = hexUpper
        for b in path.utf8 {
            if isEscaped(b) {
                guard i + 3 <= end, buf[i] == 0x25, buf[i + 1] == upper[Int(b >> 4)], buf[i + 2] == upper[Int(b & 0xf)] else { return false }
                i += 3
            } else {
                guard i < end, buf[i] == b else { return false }
                i += 1
            }
        }
        /// Moves past ` KEY=` when the next field is `key`.
        func field(_ key: StaticString) -> Bool {
            let n = key.utf8CodeUnitCount
            guard i + n + 2 <= end, buf[i] == 0x20, buf[i + n + 1] == 0x3d else { return false }
            for k in 0..<n where buf[i + 1 + k] != key.utf8Start[k] { return false }
            i += n + 2
            return true
        }
        /// A decimal number up to the next space or the line's end.
        func number() -> UInt64? {
            var n: UInt64 = 0
            let first = i
            while i < end, buf[i] >= 0x30, buf[i] <= 0x39 {
                let (m, o1) = n.multipliedReportingOverflow(by: 10)
                let (a, o2) = m.addingReportingOverflow(UInt64(buf[i] - 0x30))
                guard !o1 && !o2 else { return nil }
                n = a
                i += 1
            }
            return i > first ? n : nil
        }
        func time(_ t: FileTime) -> Bool {
            guard let s = number(), Int64(bitPattern: s) == t.seconds, i < end, buf[i] == 0x2e else { return false }
            i += 1
            let fractionStart = i
            guard let ns = number(), i - fractionStart == 9 else { return false }
            return Int64(bitPattern: ns) == t.nanoseconds
        }
        func hex(_ digest: Digest) -> Bool {
            let lower = hexLower
            for b in digest.bytes {
                guard i + 2 <= end, buf[i] == lower[Int(b >> 4)], buf[i + 1] == lower[Int(b & 0xf)] else { return false }
                i += 2
            }
            return true
        }
        guard field("size"), number() == UInt64(size) else { return false }
        if let sha256 { guard field("sha256"), hex(sha256) else { return false } }
        if let sha512 { guard field("sha512"), hex(sha512) else { return false } }
        guard field("ino"), number() == status.inode, field("dev"), number() == status.device,
              field("mtime"), time(status.mtime), field("ctime"), time(status.ctime) else { return false }
        return i == end || buf[i] == 0x0a
    }

    private static let verifiedPrefix = Array(" verified path=".utf8)
    static let hexUpper = Array("0123456789ABCDEF".utf8)
    private static let hexLower = Array("0123456789abcdef".utf8)

    /// The values of one line, as slices of it, by key.
    private struct Fields {
        typealias Value = ArraySlice<UInt8>
        var path, size, sha256, sha512, ino, dev, mtime, ctime, url, validator, bytes, h256, h512: Value?
        var error, at, start, end, result, downloaded, failed, segs: Value?

        mutating func set(_ key: Value, _ value: Value) {
            func k(_ s: StaticString) -> Bool {
                s.utf8CodeUnitCount == key.count && key.elementsEqual(UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
            }
            if k("path") { path = value } else if k("size") { size = value } else if k("sha256") { sha256 = value }
            else if k("sha512") { sha512 = value } else if k("ino") { ino = value } else if k("dev") { dev = value }
            else if k("mtime") { mtime = value } else if k("ctime") { ctime = value } else if k("url") { url = value }
            else if k("validator") { validator = value } else if k("bytes") { bytes = value } else if k("h256") { h256 = value }
            else if k("h512") { h512 = value } else if k("error") { error = value } else if k("at") { at = value }
            else if k("start") { start = value } else if k("end") { end = value } else if k("result") { result = value }
            else if k("downloaded") { downloaded = value } else if k("failed") { failed = value }
            else if k("segs") { segs = value }
        }

        func string(_ v: Value?) -> String? { v.flatMap { JournalRecord.percentDecode($0) } }

        /// A non-negative decimal number; inode and device numbers are stored by their bit pattern.
        func int(_ v: Value?) -> Int64? {
            guard let v, !v.isEmpty, v.count <= 20 else { return nil }
            var n: UInt64 = 0
            for c in v {
                guard c >= 48 && c <= 57 else { return nil }
                let (m, o1) = n.multipliedReportingOverflow(by: 10)
                let (a, o2) = m.addingReportingOverflow(UInt64(c - 48))
                guard !o1 && !o2 else { return nil }
                n = a
            }
            return Int64(bitPattern: n)
        }

        /// `SECONDS.NANOSECONDS`, nine fraction digits.
        func time(_ v: Value?) -> FileTime? {
            guard let v, let dot = v.firstIndex(of: UInt8(ascii: ".")), v.endIndex - dot == 10,
                  let s = int(v[v.startIndex..<dot]), let ns = int(v[(dot + 1)...]) else { return nil }
            return FileTime(seconds: s, nanoseconds: ns)
        }
    }

    static func parseHex32<C: Collection>(_ bytes: C) -> UInt32? where C.Element == UInt8 {
        var n: UInt32 = 0
        for c in bytes {
            let d: UInt32
            switch c {
            case 48...57: d = UInt32(c - 48)
            case 97...102: d = UInt32(c - 87)
            case 65...70: d = UInt32(c - 55)
            default: return nil
            }
            n = n << 4 | d
        }
        return n
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
        forEachEncodedByte(of: value) { out.append($0) }
    }

    /// Whether a value byte is written as `%XX`: controls, space, DEL, and the record's own `%` and `=`.
    @inline(__always)
    static func isEscaped(_ b: UInt8) -> Bool { b <= 0x20 || b == 0x7f || b == 0x25 || b == 0x3d }

    /// The bytes ``percentEncode(_:into:)`` writes for `value`, one at a time, without an array:
    /// the one rule for encoding, hashing (``Journal/pathKey(_:)``) and comparing in place.
    @inline(__always)
    static func forEachEncodedByte(of value: String, _ body: (UInt8) -> Void) {
        let digits = hexUpper
        for b in value.utf8 {
            if isEscaped(b) {
                body(0x25)
                body(digits[Int(b >> 4)])
                body(digits[Int(b & 0xf)])
            } else {
                body(b)
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
}
