import Testing
@testable import MirrorCore

/// ``HostReachability``: failures to reach a host counted in a row per host (an answer resets
/// them), hosts given up on by scheme, host and port, and the entries that failed for it alone.
@Suite struct HostReachabilityTests {
    @Test func failuresToReachAHostCountInARowAndAnAnswerResetsThem() {
        var hosts = HostReachability()
        let down = TransferFailure.unreachable("connection refused")
        var counts: [Int] = []
        counts.append(hosts.noteFailure(at: "http://a:8080/x.bin", down))
        counts.append(hosts.noteFailure(at: "http://a:8080/y.bin", down))                          // the same host, another file
        counts.append(hosts.noteFailure(at: "http://b/x.bin", down))                               // another host counts apart
        counts.append(hosts.noteFailure(at: "http://a:8080/z.bin", .httpStatus(503, retryAfter: nil)))  // it answered
        counts.append(hosts.noteFailure(at: "http://a:8080/x.bin", down))
        #expect(counts == [1, 2, 1, 0, 1])
    }

    @Test func aHostGivenUpOnIsSaidOnceAndSkippedForEveryFile() {
        var hosts = HostReachability()
        #expect(!hosts.isGivenUp("http://a:8080/x.bin"))
        let first = hosts.giveUp(on: "http://a:8080/x.bin")
        let again = hosts.giveUp(on: "http://a:8080/other.bin")
        #expect(first && !again, "said once")
        #expect(hosts.isGivenUp("http://a:8080/third.bin"))
        #expect(!hosts.isGivenUp("http://a:8081/x.bin"), "another port is another server")
        #expect(!hosts.isGivenUp("https://a:8080/x.bin"), "another scheme is another server")
    }

    @Test func onlyEntriesThatFailedUnreachableAreCounted() {
        var hosts = HostReachability()
        hosts.noteEntryFailed(unreachable: true)
        hosts.noteEntryFailed(unreachable: false)
        hosts.noteEntryFailed(unreachable: true)
        #expect(hosts.entriesFailedUnreachable == 2)
    }
}
