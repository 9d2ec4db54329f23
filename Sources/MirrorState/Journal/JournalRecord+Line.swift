import CZlib
import MirrorFS
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// The one place the journal's line format is written and read (docs/journal.md, "File format"):
/// `CRC KIND key=value ...`, percent-encoded values, and the in-place compare of the no-op path.
extension JournalRecord {
    /// The record as one line, checksum first, newline last.
    public func encodedLine() -> [UInt8] {
        var line: [UInt8] = []
        encode(into: &line)
        return line
    }

    /// Appends the record's line to `line`: the checksum's place first, the body, then the
    /// checksum of the body written into its place. One buffer, reserved once, where a body and
    /// a line built apart grew two arrays a record (a group commit encodes thousands).
    func encode(into line: inout [UInt8]) {
        var fields: [(String, String)] = []
        fields.reserveCapacity(12)
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
            // Last, after the fields that say which file it is (an older reader compared them in place).
            if r.adopted { fields.append(("found", "1")) }
        case .partial(let r):
            kind = "partial"
            identity(r.identity)
            fields.append(("url", r.url))
            if let v = r.validator { fields.append(("validator", v)) }
            fields.append(("bytes", String(r.bytes)))
            for (algorithm, state) in r.hashStates { fields.append((algorithm.stateKey.description, state)) }
            if let segments = r.segments {
                fields.append(("segs", SegmentRecord.listText(segments)))
                // Last of the segments' fields, after what every version reads.
                if let sources = SegmentRecord.sourcesText(segments) {
                    fields += [("srcs", sources.list), ("segsrc", sources.indexes)]
                }
            }
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
        // Room for a usual line; growing by doubling, since a batch encodes many into one buffer.
        if line.capacity < line.count + 256 { line.reserveCapacity(max(2 * line.count, line.count + 256)) }
        let crcStart = line.count
        line.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: 8))
        line.append(UInt8(ascii: " "))
        let bodyStart = line.count
        line.append(contentsOf: kind.utf8)
        for (key, value) in fields {
            line.append(UInt8(ascii: " "))
            line.append(contentsOf: key.utf8)
            line.append(UInt8(ascii: "="))
            JournalRecord.percentEncode(value, into: &line)
        }
        let crc = JournalRecord.checksum(line[bodyStart...])
        line.replaceSubrange(crcStart ..< crcStart + 8, with: JournalRecord.hex8(crc).utf8)
        line.append(UInt8(ascii: "\n"))
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
                guard var list = SegmentRecord.parseList(text, size: id.size) else { return nil }
                if let sources = f.string(f.srcs), let indexes = f.string(f.segsrc) {
                    guard SegmentRecord.attachSources(list: sources, indexes: indexes, to: &list) else { return nil }
                }
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

    static let verifiedPrefix = Array(" verified path=".utf8)

    static let hexUpper = Array("0123456789ABCDEF".utf8)

    /// The values of one line, as slices of it, by key.
    private struct Fields {
        typealias Value = ArraySlice<UInt8>
        var path, size, ino, dev, mtime, ctime, url, validator, bytes: Value?
        var error, at, start, end, result, downloaded, failed, segs, srcs, segsrc, found, all, reason, manifest: Value?
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
            else if k("srcs") { srcs = value } else if k("segsrc") { segsrc = value }
            else if let algorithm = DigestAlgorithm.journal(key: key) { digests[algorithm] = value }
            else if let algorithm = DigestAlgorithm.journal(key: key, state: true) { states[algorithm] = value }
        }

        func string(_ v: Value?) -> String? { v.flatMap { JournalRecord.percentDecode($0) } }

        /// A non-negative decimal number; inode and device numbers are stored by their bit pattern.
        func int(_ v: Value?) -> Int64? { v.flatMap { JournalRecord.decimal($0) } }

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

    /// Eight lowercase hex digits, written into a small string (no allocation).
    static func hex8(_ value: UInt32) -> String {
        String(unsafeUninitializedCapacity: 8) { out in
            for i in 0 ..< 8 { out[i] = Digest.hexDigit(UInt8(truncatingIfNeeded: value >> (28 - 4 * UInt32(i))) & 0xf) }
            return 8
        }
    }

    /// Keeps printable ASCII and UTF-8 as they are; encodes space, `%`, `=` and control bytes.
    static func percentEncode(_ value: String, into out: inout [UInt8]) {
        forEachEncodedByte(of: value) { out.append($0) }
    }

    /// Whether a value byte is written as `%XX`: controls, space, DEL, and the record's own `%` and `=`.
    @inline(__always)
    static func isEscaped(_ b: UInt8) -> Bool { b <= 0x20 || b == 0x7f || b == 0x25 || b == 0x3d }

    /// The bytes ``percentEncode(_:into:)`` writes for `value`, one at a time, without an array:
    /// the one rule for encoding.
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
        return percentDecodeBytes(bytes).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The bytes `%XX` stand for; nil when a `%` is not followed by two hex digits.
    static func percentDecodeBytes(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
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
        return out
    }
}

extension FileTime {
    /// `SECONDS.NANOSECONDS` with nine fraction digits.
    var journalText: String {
        let ns = String(nanoseconds)
        return "\(seconds).\(String(repeating: "0", count: max(0, 9 - ns.count)))\(ns)"
    }
}

extension JournalRecord {
    /// A non-negative decimal number of 1 to 20 digits, read as its bit pattern (inode and device
    /// numbers are stored that way); nil for anything else, an overflow included. The one reader
    /// of journal numbers, for whole records and for the verified lines looked up in place.
    static func decimal<Digits: Collection>(_ digits: Digits) -> Int64? where Digits.Element == UInt8 {
        guard !digits.isEmpty, digits.count <= 20 else { return nil }
        var n: UInt64 = 0
        for c in digits {
            guard c >= 48 && c <= 57 else { return nil }
            let (m, o1) = n.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(UInt64(c - 48))
            guard !o1 && !o2 else { return nil }
            n = a
        }
        return Int64(bitPattern: n)
    }
}
