/// Version 2 of the chunk index (docs/manifest.md, "Chunk indexes"): five text lines that say
/// what it is, then one fixed-size binary record a chunk. The text index spent about 71 bytes a
/// chunk (64 hex digits and a decimal length); this one spends 10 for a 256 MiB file (a 2-byte
/// length and an 8-byte digest), which is what lets chunks be 4 times smaller for the same index.
///
///     mirror-chunks 2
///     chunking gear min=4096 avg=16384 max=65536 level=1
///     size 268435456
///     sha256 <64 hex digits: the whole file>
///     chunks 13489 length=2 digest=8
///     <13489 records: length − 1, `length` bytes little-endian; the first `digest` bytes of the chunk's SHA-256>
extension ChunkIndex {
    /// Bytes of a record's length field: enough for `max − 1`.
    static func lengthBytes(forMax max: Int) -> Int {
        var n = 1
        while n < 4 && (max - 1) >> (8 * n) != 0 { n += 1 }
        return n
    }

    /// The bytes of the index (version 2).
    public var binary: [UInt8] {
        let lengthBytes = Self.lengthBytes(forMax: parameters.max)
        let header = "mirror-chunks 2\nchunking gear min=\(parameters.min) avg=\(parameters.average) max=\(parameters.max) "
            + "level=\(parameters.level)\nsize \(size)\nsha256 \(fileDigest)\n"
            + "chunks \(chunks.count) length=\(lengthBytes) digest=\(digestBytes)\n"
        var out = Array(header.utf8)
        out.reserveCapacity(out.count + chunks.count * (lengthBytes + digestBytes))
        for chunk in chunks {
            let value = chunk.length - 1
            for k in 0 ..< lengthBytes { out.append(UInt8(truncatingIfNeeded: value >> (8 * k))) }
            out.append(contentsOf: chunk.digest.bytes(digestBytes))
        }
        return out
    }

    static func parseBinary(_ bytes: [UInt8]) throws -> ChunkIndex {
        // The five header lines, each ending in "\n"; the records start after the fifth.
        var lines: [String] = []
        var at = 0
        while lines.count < 5 {
            guard let end = bytes[at...].firstIndex(of: UInt8(ascii: "\n")), end - at <= 200 else {
                throw Unusable(line: lines.count + 1, reason: "the header ends early")
            }
            lines.append(String(decoding: bytes[at ..< end], as: UTF8.self))
            at = end + 1
        }
        func fail(_ i: Int, _ reason: String) -> Unusable { Unusable(line: i + 1, reason: reason) }
        guard lines[0] == "mirror-chunks 2" else { throw fail(0, "not a chunk index of version 2") }
        let header = lines[1].split(separator: " ").map(String.init)
        guard header.count == 6, header[0] == "chunking", header[1] == "gear",
              let v = values(header[2...], ["min", "avg", "max", "level"]) else {
            throw fail(1, "expected \"chunking gear min=N avg=N max=N level=N\"")
        }
        let parameters = Chunker.Parameters(min: v[0], average: v[1], max: v[2], level: v[3])
        guard parameters.isUsable else { throw fail(1, "chunking parameters this mirror cannot use") }
        let sizeLine = lines[2].split(separator: " ")
        guard sizeLine.count == 2, sizeLine[0] == "size", let size = Int64(sizeLine[1]), size >= 0 else {
            throw fail(2, "expected \"size N\"")
        }
        let digestLine = lines[3].split(separator: " ")
        guard digestLine.count == 2, digestLine[0] == "sha256", let fileDigest = ChunkDigest(hex: String(digestLine[1])) else {
            throw fail(3, "expected \"sha256\" and 64 hex digits")
        }
        let countLine = lines[4].split(separator: " ").map(String.init)
        let lengthBytes = lengthBytes(forMax: parameters.max)
        guard countLine.count == 4, countLine[0] == "chunks", let count = Int(countLine[1]), count >= 0,
              let f = values(countLine[2...], ["length", "digest"]), f[0] == lengthBytes, (8 ... 32).contains(f[1]) else {
            throw fail(4, "expected \"chunks N length=\(lengthBytes) digest=D\" (D from 8 to 32)")
        }
        let digestBytes = f[1]
        // No more chunks than the minimum length allows: a bound on the memory an index can take.
        guard Int64(count) <= size / Int64(parameters.min) + 1 else { throw fail(4, "more chunks than \(size) bytes can hold") }
        let record = lengthBytes + digestBytes
        guard bytes.count - at == count * record else {
            throw Unusable(line: 0, reason: "\(bytes.count - at) bytes of records, not \(count) × \(record)")
        }
        var chunks: [Chunk] = []
        chunks.reserveCapacity(count)
        var total: Int64 = 0
        for i in 0 ..< count {
            let start = at + i * record
            var value = 0
            for k in 0 ..< lengthBytes { value |= Int(bytes[start + k]) << (8 * k) }
            let length = value + 1
            guard length <= parameters.max else { throw Unusable(line: 0, reason: "chunk \(i + 1): longer than max=\(parameters.max)") }
            total += Int64(length)
            guard total <= size else { throw Unusable(line: 0, reason: "chunk \(i + 1): the chunks add up to more than size \(size)") }
            guard length >= parameters.min || total == size else {
                throw Unusable(line: 0, reason: "chunk \(i + 1): shorter than min=\(parameters.min) before the last")
            }
            let digest = ChunkDigest(prefix: bytes[start + lengthBytes ..< start + record])
            chunks.append(Chunk(length: length, digest: digest))
        }
        guard total == size else { throw Unusable(line: 0, reason: "the chunks add up to \(total) bytes, not size \(size)") }
        return ChunkIndex(parameters: parameters, size: size, fileDigest: fileDigest, digestBytes: digestBytes, chunks: chunks)
    }
}
