import Testing
import MirrorCore

/// Segment decisions without a server (``SegmentPolicy``).
struct SegmentPolicyTests {
    let policy = SegmentPolicy(maxConnections: 4, threshold: 64 << 20)

    @Test func onlyLargeHTTPFilesAreSegmented() {
        #expect(policy.wantsSegments(size: 64 << 20, url: "https://h/a", sourceRefusedRanges: false))
        #expect(policy.wantsSegments(size: 1 << 30, url: "HTTP://h/a", sourceRefusedRanges: false))
        #expect(!policy.wantsSegments(size: (64 << 20) - 1, url: "https://h/a", sourceRefusedRanges: false))
        #expect(!policy.wantsSegments(size: 1 << 30, url: "file:///a", sourceRefusedRanges: false))
        #expect(!policy.wantsSegments(size: 1 << 30, url: "https://h/a", sourceRefusedRanges: true))
        #expect(!SegmentPolicy(maxConnections: 1, threshold: 0).wantsSegments(size: 1 << 30, url: "https://h/a", sourceRefusedRanges: false))
        #expect(!SegmentPolicy(maxConnections: 4, threshold: 0).wantsSegments(size: 1 << 20, url: "https://h/a", sourceRefusedRanges: false),
                "never under 2 MiB")
    }

    @Test func segmentsAreAboutFourPerConnectionWithin4To32MiB() {
        let mib: Int64 = 1 << 20
        #expect(SegmentPolicy.segmentLength(size: 64 * mib, connections: 4) == 4 * mib)
        #expect(SegmentPolicy.segmentLength(size: 512 * mib, connections: 4) == 32 * mib)
        #expect(SegmentPolicy.segmentLength(size: 8 << 30, connections: 4) == 32 * mib)
        #expect(SegmentPolicy.segmentLength(size: 100 * mib + 1, connections: 4) == 7 * mib)
    }

    /// A slice cache (nginx `slice 1m`, docs/fleet.md) gets hits only if no segment boundary
    /// falls inside a slice.
    @Test func segmentBoundariesAreWholeSlices() {
        #expect(SegmentPolicy.sliceAlignment == 1 << 20)
        for size: Int64 in [2 << 20, (64 << 20) + 1, 100_000_007, 3 << 30, (8 << 30) + 12_345, 1 << 40] {
            for connections in [1, 2, 3, 4, 7, 16] {
                let length = SegmentPolicy.segmentLength(size: size, connections: connections)
                #expect(length % SegmentPolicy.sliceAlignment == 0, "size \(size), \(connections) connections: \(length)")
            }
        }
    }

    @Test func aFileWidensOnlyWhileTheHashWaitsAndItRunsAtFullWidth() {
        #expect(policy.widen(waited: 0.4, transferWaited: 1, running: 1, width: 1, runRequests: 1) == nil, "the hash is busy: more connections would not help")
        #expect(policy.widen(waited: 0.6, transferWaited: 1, running: 1, width: 1, runRequests: 1) == 2)
        #expect(policy.widen(waited: 0.8, transferWaited: 1, running: 2, width: 2, runRequests: 2) == 4, "waiting three quarters of the time doubles")
        #expect(policy.widen(waited: 0.8, transferWaited: 1, running: 3, width: 3, runRequests: 3) == 4, "never past --segments")
        #expect(policy.widen(waited: 0.9, transferWaited: 1, running: 1, width: 2, runRequests: 1) == nil, "held back by the connection limit")
        #expect(policy.widen(waited: 0.9, transferWaited: 1, running: 4, width: 4, runRequests: 4) == nil)
        // The hash waits because the transfer thread is busy (loopback, few cores): not the network.
        #expect(policy.widen(waited: 0.87, transferWaited: 0.01, running: 1, width: 1, runRequests: 1) == nil, "the transfer thread is the limit")
        #expect(policy.widen(waited: 0.87, transferWaited: 0.24, running: 1, width: 1, runRequests: 1) == nil)
        #expect(policy.widen(waited: 0.97, transferWaited: 0.9, running: 1, width: 1, runRequests: 1) == 4,
                "behind a per-connection limit, waiting nine tenths of the time: four at once")
    }

    /// Several large files in flight each have a connection already: the run's requests, not only
    /// the file's, bound its width (8 × 1 GiB on 16 cores: 2.09 s widened, 1.37 s unsplit).
    @Test func aFileWidensOnlyWhileTheRunHasFewerRequestsThanSegments() {
        let eight = SegmentPolicy(maxConnections: 8, threshold: 64 << 20)
        #expect(eight.widen(waited: 0.8, transferWaited: 1, running: 1, width: 1, runRequests: 1) == 2)
        #expect(eight.widen(waited: 0.9, transferWaited: 1, running: 1, width: 1, runRequests: 1) == 4)
        #expect(eight.widen(waited: 0.9, transferWaited: 1, running: 4, width: 4, runRequests: 4) == 8)
        #expect(eight.widen(waited: 0.9, transferWaited: 1, running: 1, width: 1, runRequests: 8) == nil,
                "eight files in flight: none widens")
        #expect(eight.widen(waited: 0.9, transferWaited: 1, running: 1, width: 1, runRequests: 60) == nil,
                "small files in flight fill the link")
        #expect(eight.widen(waited: 0.9, transferWaited: 1, running: 4, width: 4, runRequests: 6) == 6,
                "never past --segments requests in the run")
        #expect(eight.widen(waited: 0.9, transferWaited: 1, running: 2, width: 2, runRequests: 7) == 3)
    }

    @Test func aSegmentThatProgressedIsRetriedAloneUnlessItsRangesAreDistrusted() {
        let reset = TransferFailure.network(code: 56, message: "reset", transient: true)
        #expect(policy.afterSegmentFailure(reset, received: 1 << 20, requested: 4 << 20, entryFailing: false, stopping: false) == .retrySegment)
        #expect(policy.afterSegmentFailure(reset, received: 100, requested: 4 << 20, entryFailing: false, stopping: false) == .failEntry)
        #expect(policy.afterSegmentFailure(.validatorChanged, received: 1 << 20, requested: 4 << 20, entryFailing: false, stopping: false) == .failEntry)
        #expect(policy.afterSegmentFailure(.rangeIgnored, received: 1 << 20, requested: 4 << 20, entryFailing: false, stopping: false) == .failEntry)
        #expect(policy.afterSegmentFailure(reset, received: 1 << 20, requested: 4 << 20, entryFailing: true, stopping: false) == .failEntry)
        #expect(policy.afterSegmentFailure(reset, received: 1 << 20, requested: 4 << 20, entryFailing: false, stopping: true) == .failEntry)
    }
}
