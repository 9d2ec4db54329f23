/// What follows a failed attempt at an entry: facts in, a decision out. No server, no clock, no
/// randomness of its own (the jitter is a fact), so every rule is unit-tested
/// (`Tests/MirrorCoreTests/Policy/RetryPolicyTests.swift`); docs/faults.md states the same rules.
///
/// - An attempt that received at least 64 KiB, or all that was left, made real progress: the count
///   of failures resets and the next attempt starts at once (a connection that drops every
///   megabyte still delivers the file).
/// - Failures without progress are retried on the same source after an exponential back-off with
///   jitter, or as long as the server asked (`Retry-After`, RFC 9110 §10.2.3, capped at 5
///   minutes), at most `retries` times; then the next source.
/// - A failure no retry can fix (404, a wrong length, a write error) moves to the next source at once.
/// - A host that could not be reached twice (by one entry, or by any two since it last answered)
///   is marked (a connection that brought no byte for the stall timeout counts as not reached,
///   ``TransferFailure/stalled(seconds:)``): no entry asks it again in this run, so a dead server with 20,000 entries costs
///   two connection attempts, not 20,000.
/// - A `--prefer` source (a site cache or a neighbour, none of the manifest's sources) that fails
///   without real progress, whatever the failure (5xx, 429, a `Retry-After`, a stall, a reset), is
///   passed over for that entry at once: the entry goes on to the manifest's sources, and the
///   preferred source's `Retry-After` never delays them (docs/fleet.md, "--prefer"). It is only a
///   cheaper place to ask; waiting for it would hold a file the origin could serve now.
/// - An entry stops after 50 attempts that made no progress, whatever the sources.
public struct RetryPolicy: Sendable, Equatable {
    /// `--retries`: failed attempts without progress per source.
    public var retries: Int
    /// Seconds of the first back-off (doubled per failure, at most 60 s).
    public var baseDelay: Double

    public static let attemptCap = 50
    public static let retryAfterCap = 300.0
    public static let backoffCap = 60.0
    public static let realProgress: Int64 = 64 << 10

    public init(retries: Int, baseDelay: Double) {
        self.retries = retries
        self.baseDelay = baseDelay
    }

    public struct Facts: Sendable {
        public var failure: TransferFailure
        /// Bytes the failed attempt added to the file.
        public var progress: Int64
        /// Bytes the file lacked when the attempt started.
        public var remainingAtStart: Int64
        /// Failures without progress on this source before this one.
        public var failuresWithoutProgress: Int
        /// Attempts at this entry so far, this one included.
        public var attempts: Int
        /// A factor in [0.5, 1.5), so that a fleet of machines does not retry in lockstep.
        public var jitter: Double
        /// Attempts at any entry that could not reach this source's host since it last answered,
        /// this one included.
        public var hostUnreachableFailures: Int
        /// The source is a `--prefer` URL and none of the manifest's sources for the entry.
        public var preferredSource: Bool

        public init(failure: TransferFailure, progress: Int64, remainingAtStart: Int64, failuresWithoutProgress: Int,
                    attempts: Int, jitter: Double = 1, hostUnreachableFailures: Int = 0, preferredSource: Bool = false) {
            self.failure = failure
            self.progress = progress
            self.remainingAtStart = remainingAtStart
            self.failuresWithoutProgress = failuresWithoutProgress
            self.attempts = attempts
            self.jitter = jitter
            self.hostUnreachableFailures = hostUnreachableFailures
            self.preferredSource = preferredSource
        }
    }

    public enum Action: Equatable, Sendable {
        /// The same source again, after this many seconds.
        case retry(after: Double)
        /// The next source (or giving up, when there is none); `markHostUnreachable`: no entry
        /// asks this source's host again in this run.
        case nextSource(markHostUnreachable: Bool)
        /// No more attempts at this entry in this run.
        case stop
    }

    public struct Decision: Equatable, Sendable {
        public var action: Action
        /// The count to keep for the next attempt on this source.
        public var failuresWithoutProgress: Int
        public var madeProgress: Bool
    }

    public func decide(_ facts: Facts) -> Decision {
        let progressed = RetryPolicy.isRealProgress(facts.progress, remainingAtStart: facts.remainingAtStart)
        let failures = progressed ? 0 : facts.failuresWithoutProgress + 1
        func decision(_ action: Action) -> Decision {
            Decision(action: action, failuresWithoutProgress: failures, madeProgress: progressed)
        }
        if facts.attempts >= RetryPolicy.attemptCap && !progressed { return decision(.stop) }
        var unreachable = false
        if facts.failure.isUnreachable, failures >= 2 || facts.hostUnreachableFailures >= 2 { unreachable = true }
        if !facts.failure.isTransient || unreachable || failures > retries {
            return decision(.nextSource(markHostUnreachable: unreachable))
        }
        if facts.preferredSource {
            // Its Retry-After (RFC 9110 §10.2.3) speaks for the preferred host only.
            return decision(progressed ? .retry(after: 0) : .nextSource(markHostUnreachable: false))
        }
        if let asked = facts.failure.retryAfter { return decision(.retry(after: min(asked, RetryPolicy.retryAfterCap))) }
        if progressed { return decision(.retry(after: 0)) }
        return decision(.retry(after: backoff(failures: failures) * facts.jitter))
    }

    /// base × 2^(n−1), at most 60 s (before jitter).
    public func backoff(failures: Int) -> Double {
        var delay = baseDelay
        for _ in 0..<max(0, min(failures - 1, 16)) { delay *= 2 }
        return min(RetryPolicy.backoffCap, delay)
    }

    /// 64 KiB, or everything that was left: such an attempt counts as progress.
    public static func isRealProgress(_ bytes: Int64, remainingAtStart: Int64) -> Bool {
        bytes > 0 && bytes >= min(realProgress, max(1, remainingAtStart))
    }
}
