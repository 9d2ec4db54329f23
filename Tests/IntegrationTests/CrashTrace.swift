import Foundation

/// One call of a `MIRROR_TEST_TRACE` file (written by MirrorFS's `DiskTrace`): its kind, its
/// fields, and for a `write` the bytes written. `seq` is its place in the trace.
struct TraceOp: CustomStringConvertible {
    let seq: Int
    let kind: String
    let fields: [String: String]
    let payload: [UInt8]

    subscript(_ key: String) -> String? { fields[key] }
    func int(_ key: String) -> Int64? { fields[key].flatMap { Int64($0) } }
    var ino: UInt64? { fields["ino"].flatMap { UInt64($0) } }

    var description: String {
        let shown = fields.keys.sorted().map { "\($0)=\(fields[$0] ?? "")" }.joined(separator: " ")
        return "#\(seq) \(kind) \(shown)"
    }

    /// A call whose effect is on names, sizes or modes: the file system's journal orders these.
    var isMetadata: Bool {
        ["open", "mkdir", "symlink", "unlink", "rmdir", "rename", "exchange", "link", "truncate", "allocate", "chmod"].contains(kind)
    }

    /// Reads a whole trace file.
    static func parse(_ bytes: [UInt8]) throws -> [TraceOp] {
        var ops: [TraceOp] = []
        var i = 0
        while i < bytes.count {
            guard let end = bytes[i...].firstIndex(of: UInt8(ascii: "\n")) else {
                throw CrashTraceError("a trace line without its end at byte \(i)")
            }
            let words = bytes[i..<end].split(separator: UInt8(ascii: " "))
            i = end + 1
            guard let first = words.first else { continue }
            var fields: [String: String] = [:]
            for word in words.dropFirst() {
                guard let eq = word.firstIndex(of: UInt8(ascii: "=")) else { throw CrashTraceError("a field without = in the trace") }
                fields[String(decoding: word[word.startIndex..<eq], as: UTF8.self)] = decode(word[(eq + 1)...])
            }
            let kind = String(decoding: first, as: UTF8.self)
            var payload: [UInt8] = []
            if kind == "write" {
                guard let length = fields["len"].flatMap(Int.init), i + length < bytes.count + 1 else {
                    throw CrashTraceError("a write without its bytes in the trace")
                }
                payload = Array(bytes[i..<(i + length)])
                i += length + 1
            }
            ops.append(TraceOp(seq: ops.count, kind: kind, fields: fields, payload: payload))
        }
        return ops
    }

    static func decode(_ value: ArraySlice<UInt8>) -> String {
        var out: [UInt8] = []
        var j = value.startIndex
        while j < value.endIndex {
            if value[j] == UInt8(ascii: "%"), j + 2 < value.endIndex + 1,
               let byte = UInt8(String(decoding: value[(j + 1)..<min(j + 3, value.endIndex)], as: UTF8.self), radix: 16) {
                out.append(byte)
                j += 3
            } else {
                out.append(value[j])
                j += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

struct CrashTraceError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// CRC-32 as zlib's `crc32` computes it (the journal's line check, docs/journal.md rule 2).
enum CRC32 {
    static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func of<S: Sequence<UInt8>>(_ bytes: S) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = table[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}

/// The valid part of a journal as a crash left it (docs/journal.md, "Opening and recovery"): the
/// lines after the header up to the first that fails its CRC, is malformed or has no newline,
/// each with the offset where it starts.
struct JournalLines {
    struct Record {
        let offset: Int
        let kind: String
        let fields: [String: String]
    }

    var records: [Record] = []

    init(_ bytes: [UInt8]) {
        let header = Array("mirror-journal 1\n".utf8)
        guard bytes.starts(with: header) else { return }
        var i = header.count
        while i < bytes.count {
            guard let end = bytes[i...].firstIndex(of: UInt8(ascii: "\n")) else { return }
            let line = bytes[i..<end]
            guard line.count > 9, line[line.startIndex + 8] == UInt8(ascii: " "),
                  let crc = UInt32(String(decoding: line.prefix(8), as: UTF8.self), radix: 16),
                  CRC32.of(line.dropFirst(9)) == crc else { return }
            let words = line.dropFirst(9).split(separator: UInt8(ascii: " "))
            guard let kind = words.first else { return }
            var fields: [String: String] = [:]
            for word in words.dropFirst() {
                guard let eq = word.firstIndex(of: UInt8(ascii: "=")) else { return }
                fields[String(decoding: word[word.startIndex..<eq], as: UTF8.self)] = TraceOp.decode(word[(eq + 1)...])
            }
            records.append(Record(offset: i, kind: String(decoding: kind, as: UTF8.self), fields: fields))
            i = end + 1
        }
    }

    /// The records that count after replay: the latest `verified` and `partial` of each path, a
    /// `verified` clearing the path's `partial`, a `forget` its `partial`, `forget all=1` both.
    func latest() -> (verified: [String: Record], partial: [String: Record]) {
        var verified: [String: Record] = [:]
        var partial: [String: Record] = [:]
        for r in records {
            guard let path = r.fields["path"] else { continue }
            switch r.kind {
            case "verified": verified[path] = r; partial[path] = nil
            case "partial": partial[path] = r
            case "forget":
                partial[path] = nil
                if r.fields["all"] == "1" { verified[path] = nil }
            default: break
            }
        }
        return (verified, partial)
    }
}
