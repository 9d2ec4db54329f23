import Testing
import MirrorCore

/// The space check's arithmetic (``SpaceCheck``); the statvfs side is tested with a small tmpfs
/// in `DeletionTests.aSetThatCannotFitEndsBeforeTheFirstRequest`.
struct SpaceCheckTests {
    let check = SpaceCheck(blockSize: 4096)

    @Test func eachFileNeedsItsSizeInWholeBlocksLessWhatItsPartialHolds() {
        #expect(check.needed([]) == 0)
        #expect(check.needed([.init(size: 1, allocated: 0)]) == 4096, "a byte takes a block")
        #expect(check.needed([.init(size: 10_000, allocated: 4096)]) == 8192)
        #expect(check.needed([.init(size: 1 << 30, allocated: 1 << 30)]) == 0, "a preallocated partial needs nothing more")
        #expect(check.needed([.init(size: 100, allocated: 8192)]) == 0, "never less than nothing")
        #expect(check.needed([.init(size: 4096, allocated: 0), .init(size: 4097, allocated: 0)]) == 4096 * 3)
    }

    /// Sizes past what a manifest may give (its rules stop them) still never trap: the sum stays
    /// at `Int64.max`, which no file system has free.
    @Test func sizesNearTwoToTheSixtyThreeAddUpWithoutATrap() {
        #expect(check.needed([.init(size: .max, allocated: 0)]) > .max - 4096)
        #expect(check.needed([.init(size: 1 << 62, allocated: 0), .init(size: 1 << 62, allocated: 0), .init(size: 1 << 62, allocated: 0)]) == .max)
        #expect(check.shortfall(needed: .max, free: 1 << 40) != nil)
    }

    @Test func aShortfallIsWhatIsMissing() {
        #expect(check.shortfall(needed: 100, free: 100) == nil)
        #expect(check.shortfall(needed: 32 << 20, free: 20 << 20) == 12 << 20)
    }
}
