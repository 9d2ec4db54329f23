import MirrorKit

/// What the network looked like to a run, so an admin can tell a site whose files wait on round
/// trips from one whose bytes wait on bandwidth (docs/cli.md, "Output" and "Metrics"): the
/// shortest wait from a request sent to its first response byte (about one round trip, plus the
/// server's time to answer), the connections the run opened, and the bytes received over the time
/// requests were running.
public struct LinkSeen: Sendable, Equatable {
    /// The shortest wait for a first response byte, in seconds; nil before any response.
    public private(set) var roundTrip: Double?
    /// Connections opened (libcurl's `CURLINFO_NUM_CONNECTS`, summed).
    public private(set) var connections: Int64 = 0
    /// Monotonic time of the first request handed to a transfer thread, and of the last one
    /// seen ending.
    private var firstStart: Double?
    private var lastEnd: Double?

    public init() {}

    mutating func requestStarted(at now: Double) {
        if firstStart == nil { firstStart = now }
    }

    mutating func requestEnded(at now: Double, firstByteWait: Double?, connectionsOpened: Int) {
        lastEnd = now
        connections = connections.addingClamped(Int64(connectionsOpened))
        guard let wait = firstByteWait, wait >= 0 else { return }
        roundTrip = min(roundTrip ?? wait, wait)
    }

    /// Seconds from the first request to the last end; nil before any request ended.
    public var transferSeconds: Double? {
        guard let firstStart, let lastEnd, lastEnd > firstStart else { return nil }
        return lastEnd - firstStart
    }

    /// `bytes` over ``transferSeconds``, nil without a transfer.
    public func bytesPerSecond(_ bytes: Int64) -> Double? {
        transferSeconds.map { Double(max(0, bytes)) / $0 }
    }
}
