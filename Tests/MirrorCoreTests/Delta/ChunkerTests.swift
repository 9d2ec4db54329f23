import Foundation
@testable import MirrorModel
import Testing
@testable import MirrorCore
@testable import MirrorFS

/// Content-defined chunking (``Chunker``): cuts follow the content, so the chunks of a region two
/// versions share are the same chunks wherever the region lies.
struct ChunkerTests {
    /// Deterministic bytes (xorshift), so a failure replays.
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed | 1
        return (0 ..< count).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
    }

    static func chunks(_ data: [UInt8], _ parameters: Chunker.Parameters = .standard) throws -> [Chunker.Chunk] {
        let dir = try ManifestTempDir()
        let path = dir.path + "/f"
        try dir.write(data, to: path)
        let fd = open(path, O_RDONLY)
        #expect(fd >= 0)
        let file = FileDescriptor(fd: fd, displayPath: path)
        defer { file.close() }
        var out: [Chunker.Chunk] = []
        try Chunker(parameters).chunks(of: file, size: Int64(data.count)) { out.append($0) }
        return out
    }

    @Test func chunksCoverTheFileInOrderWithinTheirBounds() throws {
        let data = Self.bytes(3 << 20, seed: 1)
        let chunks = try Self.chunks(data)
        var offset: Int64 = 0
        for (i, chunk) in chunks.enumerated() {
            #expect(chunk.offset == offset)
            #expect(chunk.length <= Chunker.Parameters.standard.max)
            if i < chunks.count - 1 { #expect(chunk.length >= Chunker.Parameters.standard.min) }
            let piece = Array(data[Int(chunk.offset) ..< Int(chunk.offset) + chunk.length])
            #expect(chunk.digest == ChunkDigest(Hasher.digest(.sha256, of: piece).bytes))
            offset += Int64(chunk.length)
        }
        #expect(offset == Int64(data.count))
        // About the average size: 3 MiB in 64 KiB chunks is about 48 (min 16 KiB shifts it up).
        #expect((24 ... 72).contains(chunks.count), "\(chunks.count) chunks")
    }

    /// An insertion and a deletion change only the chunks around them: most chunk digests of the
    /// old version are found in the new one. Fixed-size blocks would share almost none.
    @Test func anInsertionAndADeletionKeepTheOtherChunks() throws {
        let old = Self.bytes(4 << 20, seed: 2)
        var new = old
        new.insert(contentsOf: Self.bytes(1000, seed: 3), at: 1 << 20)
        new.removeSubrange((3 << 20) ..< (3 << 20) + 5000)
        let before = Set(try Self.chunks(old).map(\.digest))
        let after = try Self.chunks(new)
        let shared = after.filter { before.contains($0.digest) }.count
        #expect(after.count - shared <= 6, "\(after.count - shared) of \(after.count) chunks changed")
    }

    /// A file shorter than the minimum is one chunk, and an empty one none.
    @Test func smallFilesAreOneChunk() throws {
        #expect(try Self.chunks(Self.bytes(1000, seed: 4)).map(\.length) == [1000])
        #expect(try Self.chunks([]).isEmpty)
    }

    /// Highly regular data (zeros) has no cut points: chunks are then the maximum size.
    @Test func zerosAreCutAtTheMaximum() throws {
        let chunks = try Self.chunks([UInt8](repeating: 0, count: 600 << 10))
        #expect(chunks.map(\.length) == [256 << 10, 256 << 10, 88 << 10])
    }

    /// The gear table is the published one (docs/manifest.md): its first values fix it.
    @Test func theGearTableIsSplitmix64FromTheDocumentedSeed() {
        #expect(Chunker.gear.count == 256)
        var state: UInt64 = 0x6d69_7272_6f72
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        #expect(Chunker.gear[0] == z ^ (z >> 31))
    }
}
