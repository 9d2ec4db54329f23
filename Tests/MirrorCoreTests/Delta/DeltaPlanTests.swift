@testable import MirrorModel
import Testing
@testable import MirrorCore

/// ``DeltaPlan``: which parts of the new file are copied and which fetched, coalesced and bounded.
struct DeltaPlanTests {
    static func d(_ n: Int) -> ChunkDigest { ChunkDigest(Hasher.digest(.sha256, of: [UInt8(n & 0xff), UInt8(n >> 8)]).bytes) }

    /// An index of chunks named 0, 1, 2, ... each `length` bytes.
    static func index(_ names: [Int], length: Int = 100) -> ChunkIndex {
        ChunkIndex(parameters: .standard, size: Int64(names.count * length), fileDigest: d(9999),
                   chunks: names.map { ChunkIndex.Chunk(length: length, digest: d($0)) })
    }

    @Test func neighboursOfOneKindAreOneSegmentAndCopiesJoinWhenContiguousInBoth() {
        // New: 0 1 X Y 2 3; the old file holds 0 1 2 3 at 0, 100, 200, 300.
        let found = [Self.d(0): Int64(0), Self.d(1): 100, Self.d(2): 200, Self.d(3): 300]
        let plan = DeltaPlan(index: Self.index([0, 1, 50, 51, 2, 3]), found: found)
        #expect(plan.segments == [.init(start: 0, end: 200, local: true), .init(start: 200, end: 400, local: false),
                                  .init(start: 400, end: 600, local: true)])
        #expect(plan.copies == [.init(from: 0, to: 0, length: 200), .init(from: 200, to: 400, length: 200)])
        #expect(plan.remoteBytes == 200 && plan.localBytes == 400 && plan.remoteRanges == 1)
    }

    @Test func aChunkFoundElsewhereInTheOldFileIsCopiedFromThere() {
        let found = [Self.d(0): Int64(500), Self.d(1): 0]
        let plan = DeltaPlan(index: Self.index([0, 1]), found: found)
        #expect(plan.segments == [.init(start: 0, end: 200, local: true)])
        #expect(plan.copies == [.init(from: 500, to: 0, length: 100), .init(from: 0, to: 100, length: 100)])
    }

    /// Past the bound, the shortest local runs between fetched ones are fetched too.
    @Test func theSegmentCountIsBounded() {
        // Alternating: local, remote, local, remote, ... 41 segments.
        let names = Array(0 ..< 41)
        var found: [ChunkDigest: Int64] = [:]
        for n in names where n % 2 == 0 { found[Self.d(n)] = Int64(n * 100) }
        let plan = DeltaPlan(index: Self.index(names), found: found, maxSegments: 11)
        #expect(plan.segments.count <= 11, "\(plan.segments.count)")
        #expect(plan.segments.first?.start == 0 && plan.segments.last?.end == 4100)
        for (a, b) in zip(plan.segments, plan.segments.dropFirst()) { #expect(a.end == b.start && a.local != b.local) }
        // Every copy lands inside a local segment, and the local segments are exactly the copies.
        let localLength = plan.segments.filter(\.local).reduce(0) { $0 + $1.length }
        #expect(plan.localBytes == localLength)
        #expect(plan.remoteBytes + plan.localBytes == 4100)
    }

    @Test func aDeltaThatFetchesMostOfTheFileIsNotWorthIt() {
        let plan = DeltaPlan(index: Self.index([0, 1, 2, 3, 4]), found: [Self.d(0): 0])
        #expect(!plan.isWorthIt(size: 500, indexBytes: 10))
        let good = DeltaPlan(index: Self.index([0, 1, 2, 3, 4]), found: [Self.d(0): 0, Self.d(1): 100, Self.d(2): 200])
        #expect(good.isWorthIt(size: 500, indexBytes: 10))
        #expect(!good.isWorthIt(size: 500, indexBytes: 300), "the index counts")
        #expect(!DeltaPlan(index: Self.index([0]), found: [:]).isWorthIt(size: 100, indexBytes: 0))
    }
}
