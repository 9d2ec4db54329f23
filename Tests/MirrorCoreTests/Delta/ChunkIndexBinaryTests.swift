@testable import MirrorModel
import Testing
@testable import MirrorCore

/// The version-2 chunk index (docs/manifest.md, "Chunk indexes"): a text header, then one
/// fixed-size record a chunk. What is written reads back, both versions are read, and a broken
/// index is refused, never trusted.
struct ChunkIndexBinaryTests {
    static let a = ChunkDigest(Hasher.digest(.sha256, of: [1]).bytes)
    static let b = ChunkDigest(Hasher.digest(.sha256, of: [2]).bytes)

    static func index(_ lengths: [Int], digestBytes: Int = 8) -> ChunkIndex {
        ChunkIndex(parameters: .standard, size: Int64(lengths.reduce(0, +)), fileDigest: a, digestBytes: digestBytes,
                   chunks: lengths.enumerated().map { ChunkIndex.Chunk(length: $1, digest: $0 % 2 == 0 ? a : b) })
    }

    @Test func theRecordsReadBackWithTheirHeader() throws {
        for width in [8, 11, 32] {
            let index = Self.index([65536, 4096, 20000, 300], digestBytes: width)
            let bytes = index.binary
            #expect(try ChunkIndex.parse(bytes) == index)
            let header = "mirror-chunks 2\nchunking gear min=4096 avg=16384 max=65536 level=1\nsize 89932\nsha256 \(Self.a)\n"
                + "chunks 4 length=2 digest=\(width)\n"
            #expect(bytes.starts(with: Array(header.utf8)))
            // Two bytes of length and `width` of digest a chunk, nothing else.
            #expect(bytes.count == header.utf8.count + 4 * (2 + width))
        }
        let empty = Self.index([])
        #expect(try ChunkIndex.parse(empty.binary) == empty)
    }

    /// An index keeps the first bytes of each digest; a chunk read from a file is compared by as
    /// many (``ChunkIndex/key(_:)``).
    @Test func digestsAreKeptToTheIndexsWidth() throws {
        let index = try ChunkIndex.parse(Self.index([5000], digestBytes: 9).binary)
        #expect(index.chunks[0].digest == Self.a.truncated(to: 9))
        #expect(index.chunks[0].digest != Self.a)
        #expect(index.key(Self.a) == index.chunks[0].digest)
        #expect(index.key(Self.b) != index.chunks[0].digest)
        #expect(Self.a.truncated(to: 9).bytes(9) == Array(Hasher.digest(.sha256, of: [1]).bytes.prefix(9)))
    }

    /// Enough digest bytes that an old and a new version's chunks meet by chance with at most
    /// 2^-32 odds: 8 up to 2^16 chunks, more beyond.
    @Test func theDigestWidthGrowsWithTheChunkCount() {
        #expect(ChunkIndex.digestBytes(forChunks: 0) == 8)
        #expect(ChunkIndex.digestBytes(forChunks: 16_000) == 8)
        #expect(ChunkIndex.digestBytes(forChunks: 1 << 16) == 8)
        #expect(ChunkIndex.digestBytes(forChunks: (1 << 16) + 1) == 9)
        #expect(ChunkIndex.digestBytes(forChunks: 1 << 26) == 11)
        #expect(ChunkIndex.digestBytes(forChunks: Int.max) == 20)
    }

    /// A large file gets a larger average, so that its chunks stay about a million at most.
    @Test func aPublisherChunksALargeFileWithALargerAverage() {
        #expect(Chunker.Parameters.forFile(ofSize: 256 << 20) == .standard)
        #expect(Chunker.Parameters.forFile(ofSize: 16 << 30) == .standard)
        let big = Chunker.Parameters.forFile(ofSize: 1 << 40)
        #expect(big == Chunker.Parameters(min: 64 << 10, average: 256 << 10, max: 1 << 20, level: 1))
        #expect(big.isUsable)
    }

    @Test(arguments: [
        ("chunking gear min=4096 avg=16384 max=65536", 2, "level=N"),
        ("chunking gear min=4096 avg=16384 max=65536 level=4", 2, "cannot use"),
        ("chunking gear min=4096 avg=16000 max=65536 level=1", 2, "cannot use"),
        ("size x", 3, "size N"),
        ("sha256 00", 4, "64 hex"),
        ("chunks 2 length=3 digest=8", 5, "length=2"),
        ("chunks 2 length=2 digest=7", 5, "digest=D"),
        ("chunks 2 length=2 digest=33", 5, "digest=D"),
        ("chunks 2", 5, "chunks N"),
    ])
    func aBrokenHeaderLineIsRefusedWithItsNumber(replacement: String, line: Int, message: String) {
        let bytes = Self.index([70000 - 4464, 20300]).binary
        var lines = bytes.split(separator: UInt8(ascii: "\n"), maxSplits: 5, omittingEmptySubsequences: false).map(Array.init)
        lines[line - 1] = Array(replacement.utf8)
        do {
            _ = try ChunkIndex.parse(Array(lines.joined(separator: [UInt8(ascii: "\n")])))
            Issue.record("accepted \(replacement)")
        } catch let error as ChunkIndex.Unusable {
            #expect(error.line == line, "\(error)")
            #expect(error.reason.contains(message), "\(error)")
        } catch {
            Issue.record("\(error)")
        }
    }

    /// Records that break a rule: one too few or too many bytes, a chunk over the maximum, a
    /// short chunk before the last, lengths that do not add up, more chunks than the size holds.
    @Test func brokenRecordsAreRefused() {
        let good = Self.index([65536, 4096, 300]).binary
        func refused(_ bytes: [UInt8], _ why: String) {
            #expect(throws: ChunkIndex.Unusable.self, "\(why)") { try ChunkIndex.parse(bytes) }
        }
        refused(Array(good.dropLast()), "a byte short")
        refused(good + [0], "a byte over")
        let headerEnd = good.count - 3 * 10
        var tooShort = good
        tooShort[headerEnd + 10] = 0x00; tooShort[headerEnd + 11] = 0x01   // the second chunk: 257 bytes
        refused(tooShort, "a chunk under min before the last")
        let text = String(decoding: good.prefix(headerEnd), as: UTF8.self)
        refused(Array(text.replacingOccurrences(of: "size 69932", with: "size 69933").utf8) + good.suffix(30), "size")
        refused(Array(text.replacingOccurrences(of: "chunks 3", with: "chunks 2").utf8) + good.suffix(20), "lengths do not add up")
        refused(Array("mirror-chunks 2\nchunking".utf8), "the header ends early")
        let many = Self.index(Array(repeating: 4096, count: 3)).binary
        let claim = String(decoding: many, as: UTF8.self).replacingOccurrences(of: "size 12288", with: "size 8192")
        refused(Array(claim.utf8), "more chunks than the size holds")
        #expect(ChunkIndex.largestText(forFileOf: 1 << 30) >= Int64(Self.index(Array(repeating: 4096, count: (1 << 30) / 4096), digestBytes: 32).binary.count))
    }

    /// A client reads both versions: what a publisher before version 2 wrote still gives a delta.
    @Test func bothVersionsAreRead() throws {
        let v1 = ChunkIndex(parameters: .version1, size: 90300, fileDigest: Self.a,
                            chunks: [.init(length: 70000, digest: Self.a), .init(length: 20300, digest: Self.b)])
        let text = try ChunkIndex.parse(v1.encoded(.text))
        #expect(text == v1)
        #expect(text.digestBytes == 32 && text.parameters.level == 2)
        #expect(try ChunkIndex.parse(Self.index([5000]).encoded(.binary)).parameters.level == 1)
    }
}
