/// Version 1 of the chunk index (docs/manifest.md, "Chunk indexes"): text, one record a line, so
/// that it can be read and diffed, and what publishers wrote before version 2. Clients still
/// read it; `manifest create --chunks-format 1` still writes it, for clients that read only it.
///
///     mirror-chunks 1
///     chunking gear min=16384 avg=65536 max=262144
///     size 268435456
///     sha256 <64 hex digits: the whole file>
///     <length> <64 hex digits: the chunk's SHA-256>
///     ...
///
/// The chunk lines add up to `size`; offsets are implied by the order. The normalization level
/// is not written: version 1 always chunks at level 2.
extension ChunkIndex {
    /// The text of the index (version 1).
    public var text: String {
        var out = "mirror-chunks 1\nchunking gear min=\(parameters.min) avg=\(parameters.average) max=\(parameters.max)\n"
        out += "size \(size)\nsha256 \(fileDigest)\n"
        out.reserveCapacity(out.utf8.count + chunks.count * 72)
        for chunk in chunks { out += "\(chunk.length) \(chunk.digest)\n" }
        return out
    }

    static func parseText(_ bytes: [UInt8]) throws -> ChunkIndex {
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() }
        func text(_ i: Int) -> String { String(decoding: lines[i], as: UTF8.self) }
        func fail(_ i: Int, _ reason: String) -> Unusable { Unusable(line: i + 1, reason: reason) }
        guard lines.count >= 4 else { throw Unusable(line: 0, reason: "too short to be a chunk index") }
        guard text(0) == "mirror-chunks 1" else { throw fail(0, "not a chunk index of version 1") }
        let header = text(1).split(separator: " ").map(String.init)
        guard header.count == 5, header[0] == "chunking", header[1] == "gear",
              let v = values(header[2...], ["min", "avg", "max"]) else {
            throw fail(1, "expected \"chunking gear min=N avg=N max=N\"")
        }
        let parameters = Chunker.Parameters(min: v[0], average: v[1], max: v[2], level: 2)
        guard parameters.isUsable else { throw fail(1, "chunking parameters this mirror cannot use") }
        let sizeLine = text(2).split(separator: " ")
        guard sizeLine.count == 2, sizeLine[0] == "size", let size = Int64(sizeLine[1]), size >= 0 else {
            throw fail(2, "expected \"size N\"")
        }
        let digestLine = text(3).split(separator: " ")
        guard digestLine.count == 2, digestLine[0] == "sha256", let fileDigest = ChunkDigest(hex: String(digestLine[1])) else {
            throw fail(3, "expected \"sha256\" and 64 hex digits")
        }
        // No more chunks than the minimum length allows: a bound on the memory an index can take.
        guard Int64(lines.count - 4) <= size / Int64(parameters.min) + 1 else { throw fail(4, "more chunks than \(size) bytes can hold") }
        var chunks: [Chunk] = []
        chunks.reserveCapacity(lines.count - 4)
        var total: Int64 = 0
        for i in 4 ..< lines.count {
            let fields = lines[i].split(separator: UInt8(ascii: " "))
            guard fields.count == 2, let length = Int(String(decoding: fields[0], as: UTF8.self)),
                  length > 0, length <= parameters.max,
                  let digest = ChunkDigest(hex: String(decoding: fields[1], as: UTF8.self)) else {
                throw fail(i, "expected a chunk length (1 to \(parameters.max)) and its sha256")
            }
            total += Int64(length)
            guard total <= size else { throw fail(i, "the chunks add up to more than size \(size)") }
            guard length >= parameters.min || total == size else { throw fail(i, "a chunk shorter than min=\(parameters.min) before the last") }
            chunks.append(Chunk(length: length, digest: digest))
        }
        guard total == size else { throw Unusable(line: 0, reason: "the chunks add up to \(total) bytes, not size \(size)") }
        return ChunkIndex(parameters: parameters, size: size, fileDigest: fileDigest, chunks: chunks)
    }
}
