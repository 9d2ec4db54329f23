/// When a large file is fetched in segments, how long they are, when a file takes one more
/// connection, and what a failed segment request leads to: facts in, a decision out, unit-tested
/// without a server (`Tests/MirrorCoreTests/Policy/SegmentPolicyTests.swift`).
public struct SegmentPolicy: Sendable, Equatable {
    /// `--segments`: connections for one file at most (1 turns segments off).
    public var maxConnections: Int
    /// `--segments-above`: smaller files are one stream.
    public var threshold: Int64

    /// How often a segmented file's width is reconsidered (seconds).
    public static let widenInterval = 0.25

    public init(maxConnections: Int, threshold: Int64) {
        self.maxConnections = maxConnections
        self.threshold = threshold
    }

    /// Large files over HTTP(S) are fetched in segments, unless their source refused ranges
    /// already in this run. Files under 2 MiB never are: one request costs less than two.
    public func wantsSegments(size: Int64, url: String, sourceRefusedRanges: Bool) -> Bool {
        guard maxConnections > 1, !sourceRefusedRanges, size >= max(threshold, 2 << 20) else { return false }
        let scheme = url.prefix(8).lowercased()
        return scheme.hasPrefix("http://") || scheme.hasPrefix("https://")
    }

    /// What every segment length is a multiple of (1 MiB), so every segment boundary is too: a
    /// site cache that stores files in slices (nginx `slice 1m`, docs/fleet.md) then sees each
    /// segment request cover whole slices, and no slice is fetched from the origin for two segments.
    public static let sliceAlignment: Int64 = 1 << 20

    /// The length of a file's segments: about four per connection, between 4 and 32 MiB, in whole
    /// multiples of ``sliceAlignment``. The connections take the segments lowest first, so the
    /// bytes arrive near file order and the SHA-256 (which must run in file order) trails the
    /// transfer by a few segments at most, instead of hashing three quarters of the file after the
    /// last byte, as with one segment per connection. Not more: each segment costs its connection
    /// a round trip between the last byte of one and the first of the next (through 80 Mbit/s a
    /// connection 60 ms away, 256 MiB took 4.86 s in segments of 4 MiB and 4.68 s in 8 MiB).
    public static func segmentLength(size: Int64, connections: Int) -> Int64 {
        let unit = sliceAlignment
        let wanted = size / Int64(max(1, connections) * 4)
        return min(32 * unit, max(4 * unit, (wanted + unit - 1) / unit * unit))
    }

    /// A segmented file starts with one connection and takes more (up to `--segments`) after each
    /// quarter second in which the hash thread waited for bytes at least half the time and the
    /// transfer thread slept waiting for its sockets at least ``transferIdleFloor`` of it: one
    /// more, twice as many when the hash waited three quarters of the time, four times as many
    /// when it waited nine tenths (a link far slower than the hash: through 80 Mbit/s a
    /// connection 60 ms away, 256 MiB took 4.68 s ramping 1, 2, 4, 8 and 4.36 s ramping 1, 4, 8). Then the
    /// connection, not the SHA-256 nor the transfer thread, is what limits the file, and parallel
    /// ranges help. When the hash is busy (one stream already outruns it, as on a LAN or
    /// loopback), more connections would only take CPU from it and make it read out-of-order bytes
    /// back from the page cache: measured on loopback with 2 cores, four streams from the start
    /// took 4.0 s for 2 GiB where one took 3.1 s. When the transfer thread is busy, the hash waits
    /// for that thread, not for the network, and more connections on it only add work: on
    /// loopback with 2 cores the transfer thread slept 0.3–4 % of each span while the hash waited
    /// 33–87 % (and the file widened to four), against 90–94 % behind a 20 MB/s limit per
    /// connection.
    ///
    /// - Parameters:
    ///   - waited: the share of the last span in which the hash thread waited for bytes (0...1).
    ///   - transferWaited: the share in which the file's transfer thread slept in
    ///     `curl_multi_poll` (0...1).
    ///   - running: requests running for this file; only a file at its full width can use more.
    ///   - width: the file's current width.
    ///   - runRequests: requests running for the whole run, this file's included. A file widens
    ///     only while the run has fewer than `--segments` requests, and not past that: several
    ///     large files in flight already have a connection each (on a lent 16-core machine, 8 ×
    ///     1 GiB into tmpfs took 2.09 s when each also widened, 1.37 s with `--segments 1`), and
    ///     many small files in flight fill the link as well as segments would.
    /// - Returns: the new width, or nil to keep it.
    public func widen(waited: Double, transferWaited: Double, running: Int, width: Int, runRequests: Int) -> Int? {
        guard running >= width, waited >= 0.5, transferWaited >= SegmentPolicy.transferIdleFloor, width < maxConnections,
              runRequests < maxConnections else { return nil }
        let wanted = min(maxConnections, waited >= 0.9 ? width * 4 : waited >= 0.75 ? width * 2 : width + 1)
        return min(wanted, width + (maxConnections - runRequests))
    }

    /// The share of a span the transfer thread must sleep in `curl_multi_poll` for a file on it
    /// to widen.
    public static let transferIdleFloor = 0.25

    /// What follows one segment request's failure.
    public enum SegmentAction: Equatable, Sendable {
        /// Ask for the rest of this segment again, at once, on its own.
        case retrySegment
        /// Stop the file's other segments; once they are back, the failure is handled like a
        /// failed attempt at the whole entry (``RetryPolicy``).
        case failEntry
    }

    /// A segment that dropped after real progress, with a failure that says nothing against the
    /// source's ranges, is asked for again at once, unless the entry is already failing or the
    /// run is stopping.
    public func afterSegmentFailure(_ failure: TransferFailure, received: Int64, requested: Int64,
                                    entryFailing: Bool, stopping: Bool) -> SegmentAction {
        let progressed = RetryPolicy.isRealProgress(received, remainingAtStart: requested)
        if failure.isTransient && !failure.distrustsRanges && failure != .rangeIgnored && progressed && !entryFailing && !stopping {
            return .retrySegment
        }
        return .failEntry
    }
}
