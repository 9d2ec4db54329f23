@testable import MirrorModel
import Testing
@testable import MirrorCore

/// The chunk index format (docs/manifest.md, "Chunk indexes"): what is written reads back, and an
/// index that breaks a rule is refused with its line.
struct ChunkIndexTests {
    static let a = ChunkDigest(Hasher.digest(.sha256, of: [1]).bytes)
    static let b = ChunkDigest(Hasher.digest(.sha256, of: [2]).bytes)

    /// A version-1 index (level-2 chunking, whole digests) of chunks of these lengths.
    static func index(_ lengths: [Int]) -> ChunkIndex {
        ChunkIndex(parameters: .version1, size: Int64(lengths.reduce(0, +)), fileDigest: a,
                   chunks: lengths.enumerated().map { ChunkIndex.Chunk(length: $1, digest: $0 % 2 == 0 ? a : b) })
    }

    @Test func theTextReadsBack() throws {
        let index = Self.index([70000, 20000, 300])
        #expect(try ChunkIndex.parse(Array(index.text.utf8)) == index)
        #expect(index.text.hasPrefix("mirror-chunks 1\nchunking gear min=16384 avg=65536 max=262144\nsize 90300\nsha256 "))
        let empty = Self.index([])
        #expect(try ChunkIndex.parse(Array(empty.text.utf8)) == empty)
    }

    @Test(arguments: [
        ("mirror-chunks 3", 1, "version 1 or 2"),
        ("chunking gear min=16384 avg=65000 max=262144", 2, "cannot use"),
        ("chunking rabin min=16384 avg=65536 max=262144", 2, "chunking gear"),
        ("size -1", 3, "size N"),
        ("sha256 xyz", 4, "64 hex"),
        ("70000 " + String(repeating: "0", count: 63), 5, "chunk length"),
        ("300000 " + String(repeating: "0", count: 64), 5, "chunk length"),
    ])
    func aBrokenLineIsRefusedWithItsNumber(replacement: String, line: Int, message: String) {
        var lines = Self.index([70000, 20300]).text.split(separator: "\n").map(String.init)
        lines[line - 1] = replacement
        do {
            _ = try ChunkIndex.parse(Array((lines.joined(separator: "\n") + "\n").utf8))
            Issue.record("accepted \(replacement)")
        } catch let error as ChunkIndex.Unusable {
            #expect(error.line == line, "\(error)")
            #expect(error.reason.contains(message), "\(error)")
        } catch {
            Issue.record("\(error)")
        }
    }

    /// Parameters that would let an index ask for tiny chunks (and so a huge map of the old
    /// copy) or huge read buffers are refused, as is a short chunk before the last.
    @Test func parametersOutsideTheBoundsAndShortChunksAreRefused() {
        for header in ["chunking gear min=64 avg=128 max=256", "chunking gear min=16384 avg=65536 max=4194304"] {
            let text = Self.index([70000, 20300]).text.replacingOccurrences(of: "chunking gear min=16384 avg=65536 max=262144", with: header)
            #expect(throws: ChunkIndex.Unusable.self, "\(header)") { try ChunkIndex.parse(Array(text.utf8)) }
        }
        #expect(throws: ChunkIndex.Unusable.self) { try ChunkIndex.parse(Array(Self.index([1000, 70000]).text.utf8)) }
        #expect(ChunkIndex.largestText(forFileOf: 1 << 30) >= Int64(Self.index(Array(repeating: 4096, count: (1 << 30) / 4096)).text.utf8.count))
    }

    @Test func chunksThatDoNotAddUpToTheSizeAreRefused() {
        let text = Self.index([70000, 20300]).text.replacingOccurrences(of: "size 90300", with: "size 90301")
        #expect(throws: ChunkIndex.Unusable.self) { try ChunkIndex.parse(Array(text.utf8)) }
        let over = Self.index([70000, 20300]).text.replacingOccurrences(of: "size 90300", with: "size 80000")
        #expect(throws: ChunkIndex.Unusable.self) { try ChunkIndex.parse(Array(over.utf8)) }
        #expect(throws: ChunkIndex.Unusable.self) { try ChunkIndex.parse(Array("mirror-chunks 1\n".utf8)) }
    }
}
