import Testing
@testable import MirrorCore

/// The rule that decides which written bytes are hashed from memory and which are read back from
/// the file, without a file or a thread: one stream and segments follow the same rule.
@Suite struct HashFeedTests {
    typealias Segment = PartialFile.Segment
    static let mib: Int64 = 1 << 20

    @Test func oneStreamHashesEachPieceFromMemoryInOrder() {
        var feed = HashFeed()
        let first = feed.takesFromMemory(at: 0, count: 100)
        let second = feed.takesFromMemory(at: 100, count: 50)
        #expect(first && second && feed.fed == 150)
        // Nothing waits in the file: no read-back.
        let back = feed.readBack(over: PartialFile.oneStream(size: 1000, written: 150), all: true)
        #expect(back == nil && feed.fed == 150)
    }

    @Test func aPieceAwayFromTheFedPrefixWaitsInTheFile() {
        var feed = HashFeed()
        let taken = feed.takesFromMemory(at: 4 * Self.mib, count: 100)
        #expect(!taken && feed.fed == 0, "a later segment's bytes wait")
    }

    /// Segments written out of order: once the first is complete, the next one's written part is
    /// read back, across every complete segment, up to the first that is not.
    @Test func aCompletedSegmentLetsTheReadBackReachTheNextOnes() {
        var list = [Segment(start: 0, end: 4, written: 3), Segment(start: 4, end: 8, written: 4),
                    Segment(start: 8, end: 12, written: 2)]
        var feed = HashFeed(fed: 3)
        let before = feed.readBack(over: list, all: false)
        #expect(before == nil, "segment 0 is not complete: the prefix stops at 3")
        list[0].written = 4
        let last = feed.takesFromMemory(at: 3, count: 1)
        let back = feed.readBack(over: list, all: false)
        #expect(last && back == 4..<10 && feed.fed == 10)
        let more = feed.takesFromMemory(at: 10, count: 2)
        list[2].written = 4
        let after = feed.readBack(over: list, all: false)
        #expect(more && after == nil, "segment 2 continues from memory")
    }

    /// A kept prefix hashed again: every new byte is read back too, in large steps, unless all is
    /// asked for (a checkpoint, the final digests).
    @Test func whileReadingBackNewBytesAreReadBackInSteps() {
        let step = HashFeed.readBackStep
        let size = 100 * Self.mib
        let kept = 10 * Self.mib
        var feed = HashFeed(fed: 0, readingBack: true)
        let prefix = feed.readBack(over: PartialFile.oneStream(size: size, written: kept), all: true)
        #expect(prefix == 0..<kept)
        let fromMemory = feed.takesFromMemory(at: kept, count: 1000)
        #expect(!fromMemory, "not from memory while reading back")
        let short = PartialFile.oneStream(size: size, written: kept + step - 1)
        let notYet = feed.readBack(over: short, all: false)
        #expect(notYet == nil, "less than a step")
        let forced = feed.readBack(over: short, all: true)
        #expect(forced == kept..<(kept + step - 1))
        let long = PartialFile.oneStream(size: size, written: kept + 2 * step)
        let stepped = feed.readBack(over: long, all: false)
        #expect(stepped == (kept + step - 1)..<(kept + 2 * step))
    }

    @Test func anEmptyFileHasNothingToFeed() {
        var feed = HashFeed()
        let back = feed.readBack(over: PartialFile.oneStream(size: 0, written: 0), all: true)
        #expect(back == nil && PartialFile.oneStream(size: 0, written: 0)[0].isComplete)
    }
}
