/// A chunk index: the chunks of one version of one file, in order (docs/manifest.md, "Chunk
/// indexes"). The publisher writes it beside the file (`manifest create --chunks`); the manifest
/// names it with its size and SHA-256, so a signed manifest covers it; the client reads it to find
/// which chunks of the new version it already holds.
///
/// The format is text, one record a line, so that it can be read and diffed:
///
///     mirror-chunks 1
///     chunking gear min=16384 avg=65536 max=262144
///     size 268435456
///     sha256 <64 hex digits: the whole file>
///     <length> <64 hex digits: the chunk's SHA-256>
///     ...
///
/// The chunk lines add up to `size`; offsets are implied by the order.
public struct ChunkIndex: Equatable, Sendable {
    public var parameters: Chunker.Parameters
    public var size: Int64
    /// The whole file's SHA-256: binds the index to one version of the file.
    public var fileDigest: ChunkDigest
    public var chunks: [Chunk]

    public struct Chunk: Equatable, Sendable {
        public var length: Int
        public var digest: ChunkDigest
    }

    public init(parameters: Chunker.Parameters, size: Int64, fileDigest: ChunkDigest, chunks: [Chunk]) {
        self.parameters = parameters
        self.size = size
        self.fileDigest = fileDigest
        self.chunks = chunks
    }

    /// Why an index was not used: the run falls back to a whole download and says this.
    public struct Unusable: Error, Equatable, CustomStringConvertible {
        public var line: Int
        public var reason: String
        public var description: String { line > 0 ? "line \(line): \(reason)" : reason }
    }

    /// The text of the index.
    public var text: String {
        var out = "mirror-chunks 1\nchunking gear min=\(parameters.min) avg=\(parameters.average) max=\(parameters.max)\n"
        out += "size \(size)\nsha256 \(fileDigest)\n"
        out.reserveCapacity(out.utf8.count + chunks.count * 72)
        for chunk in chunks { out += "\(chunk.length) \(chunk.digest)\n" }
        return out
    }

    /// Reads an index, checking every line: the header, parameters this client chunks with,
    /// chunk lengths within them, and lengths that add up to `size`. The bytes were already
    /// checked against the manifest's digest, so a failure here means a publisher's bug, not an
    /// attack; it still only costs a whole download.
    public static func parse(_ bytes: [UInt8]) throws -> ChunkIndex {
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() }
        func text(_ i: Int) -> String { String(decoding: lines[i], as: UTF8.self) }
        func fail(_ i: Int, _ reason: String) -> Unusable { Unusable(line: i + 1, reason: reason) }
        guard lines.count >= 4 else { throw Unusable(line: 0, reason: "too short to be a chunk index") }
        guard text(0) == "mirror-chunks 1" else { throw fail(0, "not a chunk index of version 1") }
        let header = text(1).split(separator: " ").map(String.init)
        guard header.count == 5, header[0] == "chunking", header[1] == "gear",
              let min = value(header[2], "min"), let avg = value(header[3], "avg"), let max = value(header[4], "max") else {
            throw fail(1, "expected \"chunking gear min=N avg=N max=N\"")
        }
        let parameters = Chunker.Parameters(min: min, average: avg, max: max)
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

    /// The most bytes an index of a `size`-byte file can take: the header, and a line of at most
    /// 80 bytes for each chunk of at least 4 KiB (``Chunker/Parameters/isUsable``). The manifest
    /// rules refuse a `chunks` entry that claims more, so a manifest cannot make a client buffer
    /// an index out of proportion to its file.
    public static func largestText(forFileOf size: Int64) -> Int64 {
        256 + 80 * (size / 4096 + 1)
    }

    private static func value(_ field: String, _ name: String) -> Int? {
        guard field.hasPrefix(name + "=") else { return nil }
        return Int(field.dropFirst(name.count + 1))
    }
}
