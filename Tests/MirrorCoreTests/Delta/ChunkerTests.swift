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
        // About the average size: 3 MiB in 16 KiB chunks is about 190 (min 4 KiB shifts it up).
        #expect((100 ... 260).contains(chunks.count), "\(chunks.count) chunks")
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
        let chunks = try Self.chunks([UInt8](repeating: 0, count: 600 << 10), .version1)
        #expect(chunks.map(\.length) == [256 << 10, 256 << 10, 88 << 10])
        #expect(try Self.chunks([UInt8](repeating: 0, count: 150 << 10)).map(\.length) == [64 << 10, 64 << 10, 22 << 10])
    }

    /// The normalization level sets how many bits the masks have around the average: level 1 is
    /// one more before and one fewer after, level 2 two (docs/manifest.md, "Chunking").
    @Test func theLevelSetsTheMasks() {
        let one = Chunker(.standard), two = Chunker(.version1)
        #expect(one.maskSmall == Chunker.topBits(15) && one.maskLarge == Chunker.topBits(13))
        #expect(two.maskSmall == Chunker.topBits(18) && two.maskLarge == Chunker.topBits(14))
    }

    /// After an edit, level 1 cuts line up with the old ones sooner than level 2 did: a 64 KiB
    /// edit in 8 MiB of random bytes costs fewer changed bytes at the standard parameters than at
    /// version 1's (bench/delta measures the same on 256 MiB).
    @Test func anEditCostsLessAtTheStandardChunking() throws {
        let old = Self.bytes(8 << 20, seed: 5)
        var new = old
        new.replaceSubrange((3 << 20) + 777 ..< (3 << 20) + 777 + (64 << 10), with: Self.bytes(64 << 10, seed: 6))
        func changed(_ parameters: Chunker.Parameters) throws -> Int {
            let before = Set(try Self.chunks(old, parameters).map(\.digest))
            return try Self.chunks(new, parameters).filter { !before.contains($0.digest) }.reduce(0) { $0 + $1.length }
        }
        let standard = try changed(.standard), version1 = try changed(.version1)
        #expect(standard < version1, "standard \(standard) bytes, version 1 \(version1)")
        #expect(standard <= (64 << 10) + 3 * (64 << 10), "\(standard)")
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
