import CZlib
#if canImport(Glibc)
import Glibc
#endif

/// The one place the journal's line format is written and read (docs/journal.md, "File format"):
/// `CRC KIND key=value ...`, percent-encoded values, and the in-place compare of the no-op path.
extension JournalRecord {
    /// The record as one line, checksum first, newline last.
    public func encodedLine() -> [UInt8] {
        var fields: [(String, String)] = []
        let kind: String
        func identity(_ id: EntryIdentity) {
            fields.append(("path", id.path))
            fields.append(("size", String(id.size)))
            for (algorithm, hex) in id.digests { fields.append((algorithm.journalKey.description, hex)) }
        }
        switch self {
        case .verified(let r):
            kind = "verified"
            identity(r.identity)
            fields += [("ino", String(r.inode)), ("dev", String(r.device)),
                       ("mtime", r.mtime.journalText), ("ctime", r.ctime.journalText)]
            // Last, after the fields the no-op path compares in place (verifiedLineMatches).
            if r.adopted { fields.append(("found", "1")) }
        case .partial(let r):
            kind = "partial"
            identity(r.identity)
            fields.append(("url", r.url))
            if let v = r.validator { fields.append(("validator", v)) }
            fields.append(("bytes", String(r.bytes)))
            for (algorithm, state) in r.hashStates { fields.append((algorithm.stateKey.description, state)) }
            if let segments = r.segments { fields.append(("segs", SegmentRecord.listText(segments))) }
            if let ino = r.fileInode, let ctime = r.fileChangeTime {
                fields += [("ino", String(ino)), ("ctime", ctime.journalText)]
            }
        case .forget(let path):
            kind = "forget"
            fields.append(("path", path))
        case .removed(let path):
            kind = "forget"
            fields += [("path", path), ("all", "1")]
        case .failed(let r):
            kind = "failed"
            identity(r.identity)
            fields += [("error", r.error), ("at", String(r.time))]
        case .run(let r):
            kind = "run"
            fields += [("start", String(r.start)), ("end", String(r.end)), ("result", r.result),
                       ("downloaded", String(r.downloaded)), ("failed", String(r.failed)), ("bytes", String(r.bytes))]
            // Optional, after the fields every version writes: an older reader ignores them.
            if let reason = r.reason { fields.append(("reason", reason)) }
            if let manifest = r.manifest { fields.append(("manifest", manifest)) }
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
            guard let path = f.string(f.path), let size = f.int(f.size), !f.digests.isEmpty else { return nil }
            return EntryIdentity(path: path, size: size, digests: f.digests.compactMapValues(f.string))
        }
        switch kind.count {
        case 8 where kind.elementsEqual("verified".utf8):
            guard let id = identity(), let ino = f.int(f.ino), let dev = f.int(f.dev),
                  let mtime = f.time(f.mtime), let ctime = f.time(f.ctime) else { return nil }
            return .verified(VerifiedRecord(identity: id, inode: UInt64(bitPattern: ino), device: UInt64(bitPattern: dev), mtime: mtime, ctime: ctime,
                                            adopted: f.int(f.found) == 1))
        case 7 where kind.elementsEqual("partial".utf8):
            guard let id = identity(), let url = f.string(f.url), let bytes = f.int(f.bytes) else { return nil }
            var segments: [SegmentRecord]?
            if let text = f.string(f.segs) {
                guard let list = SegmentRecord.parseList(text, size: id.size) else { return nil }
                segments = list
            }
            return .partial(PartialRecord(identity: id, url: url, validator: f.string(f.validator), bytes: bytes,
                                          hashStates: f.states.compactMapValues(f.string), segments: segments,
                                          fileInode: f.int(f.ino).map { UInt64(bitPattern: $0) }, fileChangeTime: f.time(f.ctime)))
        case 6 where kind.elementsEqual("forget".utf8):
            guard let path = f.string(f.path) else { return nil }
            return f.int(f.all) == 1 ? .removed(path: path) : .forget(path: path)
        case 6 where kind.elementsEqual("failed".utf8):
            guard let id = identity(), let error = f.string(f.error), let at = f.int(f.at) else { return nil }
            return .failed(FailedRecord(identity: id, error: error, time: at))
        case 3 where kind.elementsEqual("run".utf8):
            guard let start = f.int(f.start), let end = f.int(f.end), let result = f.string(f.result),
                  let downloaded = f.int(f.downloaded), let failed = f.int(f.failed), let bytes = f.int(f.bytes) else { return nil }
            return .run(RunRecord(start: start, end: end, result: result, downloaded: Int(downloaded), failed: Int(failed), bytes: bytes,
                                  reason: f.string(f.reason), manifest: f.string(f.manifest)))
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
                                    digests: DigestSet, status: FileStatus) -> Bool {
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
        // Each digest the entry lists, in the order encodedLine writes them.
        for (algorithm, digest) in digests { guard field(algorithm.journalKey), hex(digest) else { return false } }
        guard field("ino"), number() == status.inode, field("dev"), number() == status.device,
              field("mtime"), time(status.mtime), field("ctime"), time(status.ctime) else { return false }
        // Fields after ctime (`found=1`) say how the file came, not which file it is.
        return i == end || buf[i] == 0x0a || buf[i] == 0x20
    }

    private static let verifiedPrefix = Array(" verified path=".utf8)

    enum VerifiedLineScan {
        /// A `verified` record with a good checksum; the range of its encoded path in the buffer.
        case verified(path: Range<Int>)
        /// A `verified` record whose checksum fails: the torn or damaged tail starts here.
        case corrupt
        /// Another kind of record: ``decode(_:)`` it.
        case other
    }

    /// Opening a journal of 100,000 entries checks each `verified` line's CRC and finds its path
    /// without decoding it (the record is decoded when looked up): the line `[start, newline)`.
    static func scanVerifiedLine(_ buf: UnsafeBufferPointer<UInt8>, from start: Int, to newline: Int) -> VerifiedLineScan {
        let prefix = verifiedPrefix
        guard let base = buf.baseAddress, newline - start > 9 + prefix.count, buf[start + 8] == 0x20,
              memcmp(base + start + 8, prefix, prefix.count) == 0 else { return .other }
        let bodyStart = start + 9
        guard let crc = parseHex32(UnsafeBufferPointer(rebasing: buf[start..<start + 8])),
              UInt32(truncatingIfNeeded: crc32(0, base + bodyStart, UInt32(newline - bodyStart))) == crc else { return .corrupt }
        let pathStart = start + 8 + prefix.count
        var pathEnd = pathStart
        while pathEnd < newline && buf[pathEnd] != 0x20 { pathEnd += 1 }
        return .verified(path: pathStart..<pathEnd)
    }
    static let hexUpper = Array("0123456789ABCDEF".utf8)
    private static let hexLower = Array("0123456789abcdef".utf8)

    /// The values of one line, as slices of it, by key.
    private struct Fields {
        typealias Value = ArraySlice<UInt8>
        var path, size, ino, dev, mtime, ctime, url, validator, bytes: Value?
        var error, at, start, end, result, downloaded, failed, segs, found, all, reason, manifest: Value?
        /// `sha256=` and the like (``DigestAlgorithm/journalKey``), and `h256=` and the like (``DigestAlgorithm/stateKey``).
        var digests = PerAlgorithm<Value>(), states = PerAlgorithm<Value>()

        mutating func set(_ key: Value, _ value: Value) {
            func k(_ s: StaticString) -> Bool {
                s.utf8CodeUnitCount == key.count && key.elementsEqual(UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
            }
            if k("path") { path = value } else if k("size") { size = value } else if k("ino") { ino = value }
            else if k("dev") { dev = value } else if k("mtime") { mtime = value } else if k("ctime") { ctime = value }
            else if k("url") { url = value } else if k("validator") { validator = value } else if k("bytes") { bytes = value }
            else if k("error") { error = value } else if k("at") { at = value }
            else if k("start") { start = value } else if k("end") { end = value } else if k("result") { result = value }
            else if k("downloaded") { downloaded = value } else if k("failed") { failed = value }
            else if k("segs") { segs = value } else if k("found") { found = value } else if k("all") { all = value }
            else if k("reason") { reason = value } else if k("manifest") { manifest = value }
            else if let algorithm = DigestAlgorithm.journal(key: key) { digests[algorithm] = value }
            else if let algorithm = DigestAlgorithm.journal(key: key, state: true) { states[algorithm] = value }
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
