/// A chunk index: the chunks of one version of one file, in order (docs/manifest.md, "Chunk
/// indexes"). The publisher writes it beside the file (`manifest create --chunks`); the manifest
/// names it with its size and SHA-256, so a signed manifest covers it; the client reads it to find
/// which chunks of the new version it already holds.
///
/// Two formats, told apart by their first line: version 2 (``binary``, what publishers write
/// now: a short text header, then 8 to 35 bytes a chunk) and version 1 (``text``, one line of
/// about 71 bytes a chunk, what earlier publishers wrote). A client reads both
/// (``parse(_:)``), since publishers and clients upgrade at different times.
public struct ChunkIndex: Equatable, Sendable {
    public var parameters: Chunker.Parameters
    public var size: Int64
    /// The whole file's SHA-256: binds the index to one version of the file.
    public var fileDigest: ChunkDigest
    /// How many bytes of each chunk's SHA-256 the index keeps: 32 in version 1; in version 2 as
    /// many as ``digestBytes(forChunks:)`` says. Every digest in ``chunks`` is truncated to it.
    public var digestBytes: Int
    public var chunks: [Chunk]

    public struct Chunk: Equatable, Sendable {
        public var length: Int
        public var digest: ChunkDigest

        public init(length: Int, digest: ChunkDigest) {
            self.length = length
            self.digest = digest
        }
    }

    /// The index's formats (the number on its first line, `mirror-chunks N`).
    public enum Format: Int, Sendable, CaseIterable {
        case text = 1
        case binary = 2
    }

    public init(parameters: Chunker.Parameters, size: Int64, fileDigest: ChunkDigest, digestBytes: Int = 32, chunks: [Chunk]) {
        self.parameters = parameters
        self.size = size
        self.fileDigest = fileDigest
        self.digestBytes = digestBytes
        self.chunks = digestBytes >= 32 ? chunks : chunks.map { Chunk(length: $0.length, digest: $0.digest.truncated(to: digestBytes)) }
    }

    /// Why an index was not used: the run falls back to a whole download and says this.
    public struct Unusable: Error, Equatable, CustomStringConvertible {
        public var line: Int
        public var reason: String
        public var description: String { line > 0 ? "line \(line): \(reason)" : reason }
    }

    /// The digest of a chunk read from a file, as this index compares it: its first
    /// ``digestBytes`` bytes.
    public func key(_ digest: ChunkDigest) -> ChunkDigest { digest.truncated(to: digestBytes) }

    /// How many bytes of each chunk's SHA-256 a version-2 index of `count` chunks keeps: at least
    /// 8, and enough that `2·log2(count) + 32` bits fit. Two different chunks of an old and a new
    /// version then share a kept digest with a chance of at most `count² / 2^(8·bytes)` ≤ 2^-32
    /// (8 bytes up to 2^16 chunks, 11 for 2^26); even then nothing wrong is installed, since the
    /// whole file is checked against its full SHA-256 and a mismatch is fetched again.
    public static func digestBytes(forChunks count: Int) -> Int {
        var log = 0
        while log < 62 && (1 << log) < count { log += 1 }
        return min(32, max(8, (2 * log + 32 + 7) / 8))
    }

    /// The bytes of the index in `format`. Version 1 can say only a level-2 chunking and full
    /// digests (``Chunker/Parameters/version1``).
    public func encoded(_ format: Format) -> [UInt8] {
        switch format {
        case .text: return Array(text.utf8)
        case .binary: return binary
        }
    }

    /// Reads an index of either format, checking every field: the header, parameters this client
    /// chunks with, chunk lengths within them, and lengths that add up to `size`. The bytes were
    /// already checked against the manifest's digest, so a failure here means a publisher's bug
    /// (or a format newer than this client), not an attack; it still only costs a whole download.
    public static func parse(_ bytes: [UInt8]) throws -> ChunkIndex {
        let first = bytes.prefix { $0 != UInt8(ascii: "\n") }
        switch String(decoding: first, as: UTF8.self) {
        case "mirror-chunks 1": return try parseText(bytes)
        case "mirror-chunks 2": return try parseBinary(bytes)
        default: throw Unusable(line: 1, reason: "not a chunk index of version 1 or 2")
        }
    }

    /// The most bytes an index of a `size`-byte file can take: the header, and at most 80 bytes
    /// for each chunk of at least 4 KiB (``Chunker/Parameters/isUsable``), in either format. The
    /// manifest rules refuse a `chunks` entry that claims more, so a manifest cannot make a client
    /// buffer an index out of proportion to its file.
    public static func largestText(forFileOf size: Int64) -> Int64 {
        256 + 80 * (size / 4096 + 1)
    }

    /// The values of the `name=N` fields of a header line, in order; nil when one is missing.
    static func values(_ fields: ArraySlice<String>, _ names: [String]) -> [Int]? {
        guard fields.count == names.count else { return nil }
        var out: [Int] = []
        for (field, name) in zip(fields, names) {
            guard field.hasPrefix(name + "="), let value = Int(field.dropFirst(name.count + 1)) else { return nil }
            out.append(value)
        }
        return out
    }
}
