import Testing
import MirrorCore

/// The retry rules of docs/faults.md, decided without a server (``RetryPolicy``).
struct RetryPolicyTests {
    let policy = RetryPolicy(retries: 2, baseDelay: 1)

    func facts(_ failure: TransferFailure, progress: Int64 = 0, remaining: Int64 = 10 << 20, failures: Int = 0,
               attempts: Int = 1, jitter: Double = 1) -> RetryPolicy.Facts {
        RetryPolicy.Facts(failure: failure, progress: progress, remainingAtStart: remaining,
                          failuresWithoutProgress: failures, attempts: attempts, jitter: jitter)
    }

    static let reset = TransferFailure.network(code: 56, message: "reset", transient: true)

    @Test func progressResetsTheCountAndRetriesAtOnce() {
        let d = policy.decide(facts(Self.reset, progress: 1_000_000, failures: 2, attempts: 30))
        #expect(d.madeProgress)
        #expect(d.failuresWithoutProgress == 0)
        #expect(d.action == .retry(after: 0))
    }

    @Test func lessThan64KiBIsNoProgressUnlessItWasAllThatWasLeft() {
        #expect(!RetryPolicy.isRealProgress(65_535, remainingAtStart: 1 << 20))
        #expect(RetryPolicy.isRealProgress(65_536, remainingAtStart: 1 << 20))
        #expect(RetryPolicy.isRealProgress(10, remainingAtStart: 10))
        #expect(!RetryPolicy.isRealProgress(0, remainingAtStart: 0))
    }

    @Test func failuresWithoutProgressBackOffExponentiallyThenMoveOn() {
        #expect(policy.decide(facts(Self.reset, failures: 0)).action == .retry(after: 1))
        #expect(policy.decide(facts(Self.reset, failures: 1)).action == .retry(after: 2))
        #expect(policy.decide(facts(Self.reset, failures: 1, jitter: 0.5)).action == .retry(after: 1))
        let third = policy.decide(facts(Self.reset, failures: 2))
        #expect(third.failuresWithoutProgress == 3)
        #expect(third.action == .nextSource(markHostUnreachable: false), "more than --retries 2")
        #expect(RetryPolicy(retries: 50, baseDelay: 1).backoff(failures: 30) == 60, "capped at a minute")
    }

    @Test func retryAfterIsHonouredAndCapped() {
        #expect(policy.decide(facts(.httpStatus(503, retryAfter: 7))).action == .retry(after: 7))
        #expect(policy.decide(facts(.httpStatus(429, retryAfter: 86_400))).action == .retry(after: 300))
    }

    @Test func permanentFailuresMoveOnAtOnce() {
        #expect(policy.decide(facts(.httpStatus(404, retryAfter: nil))).action == .nextSource(markHostUnreachable: false))
        #expect(policy.decide(facts(.lengthMismatch(server: 1, expected: 2))).action == .nextSource(markHostUnreachable: false))
    }

    @Test func aHostUnreachableTwiceIsMarked() {
        let first = policy.decide(facts(.unreachable("refused")))
        #expect(first.action == .retry(after: 1))
        let second = policy.decide(facts(.unreachable("refused"), failures: 1))
        #expect(second.action == .nextSource(markHostUnreachable: true))
    }

    func preferred(_ failure: TransferFailure, progress: Int64 = 0, failures: Int = 0, hostUnreachable: Int = 0) -> RetryPolicy.Facts {
        RetryPolicy.Facts(failure: failure, progress: progress, remainingAtStart: 10 << 20, failuresWithoutProgress: failures,
                          attempts: 1, hostUnreachableFailures: hostUnreachable, preferredSource: true)
    }

    @Test func aPreferredSourceThatRefusesOrThrottlesIsPassedOverAtOnce() {
        for failure in [TransferFailure.httpStatus(503, retryAfter: 1500), .httpStatus(429, retryAfter: 86_400),
                        .httpStatus(500, retryAfter: nil), .httpStatus(502, retryAfter: nil), Self.reset,
                        .shortBody(received: 10, expected: 1 << 20)] {
            #expect(policy.decide(preferred(failure)).action == .nextSource(markHostUnreachable: false), "\(failure)")
        }
    }

    @Test func aPreferredSourceThatStallsIsPassedOverAndMarkedLikeAnyHost() {
        #expect(policy.decide(preferred(.stalled(seconds: 30))).action == .nextSource(markHostUnreachable: false))
        #expect(policy.decide(preferred(.stalled(seconds: 30), hostUnreachable: 2)).action == .nextSource(markHostUnreachable: true),
                "a second entry's stall marks the host, as for any source")
        #expect(policy.decide(preferred(.unreachable("refused"), hostUnreachable: 1)).action == .nextSource(markHostUnreachable: false))
    }

    @Test func aPreferredSourceThatMadeProgressIsAskedAgainAtOnce() {
        let d = policy.decide(preferred(Self.reset, progress: 1 << 20, failures: 1))
        #expect(d.action == .retry(after: 0) && d.madeProgress && d.failuresWithoutProgress == 0)
    }

    @Test func theManifestsSourcesStillHonourRetryAfter() {
        #expect(policy.decide(facts(.httpStatus(503, retryAfter: 1500))).action == .retry(after: 300))
    }

    @Test func fiftyAttemptsWithoutProgressStopTheEntryButProgressDoesNot() {
        #expect(policy.decide(facts(Self.reset, attempts: 50)).action == .stop)
        #expect(policy.decide(facts(Self.reset, progress: 1 << 20, attempts: 500)).action == .retry(after: 0))
    }
}

extension RetryPolicyTests {
    /// Eight entries fail at once against a dead host: the second failure marks it for all.
    @Test func twoFailuresOfAnyEntriesMarkTheHost() {
        var f = facts(.unreachable("timed out"))
        f.hostUnreachableFailures = 1
        #expect(policy.decide(f).action == .retry(after: 1))
        f.hostUnreachableFailures = 2
        #expect(policy.decide(f).action == .nextSource(markHostUnreachable: true))
    }
}

extension RetryPolicyTests {
    /// A connection that brought no byte for the stall timeout counts like a
    /// connect that failed: twice, and the host is not asked again in this run.
    @Test func twoStallsWithoutAByteMarkTheHost() {
        #expect(TransferFailure.stalled(seconds: 30).isUnreachable)
        #expect(TransferFailure.stalled(seconds: 30).isTransient)
        #expect(policy.decide(facts(.stalled(seconds: 30))).action == .retry(after: 1))
        #expect(policy.decide(facts(.stalled(seconds: 30), failures: 1)).action == .nextSource(markHostUnreachable: true))
        var f = facts(.stalled(seconds: 30))
        f.hostUnreachableFailures = 2
        #expect(policy.decide(f).action == .nextSource(markHostUnreachable: true))
        #expect("\(TransferFailure.stalled(seconds: 30))" == "the server sent no data for 30 s after the connection opened (stalled)")
    }
}
