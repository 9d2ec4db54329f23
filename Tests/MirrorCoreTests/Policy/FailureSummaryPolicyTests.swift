import Testing
import MirrorCore

/// Which failures `--summary` names and how many it leaves to the log, without a run
/// (``FailureSummaryPolicy``; docs/cli.md, "Output").
@Suite struct FailureSummaryPolicyTests {
    let policy = FailureSummaryPolicy()
    static let origin = "https://media.example.org"
    static let log = FailureListing.logFile("/var/log/mirror/mirror.log")

    /// `count` failures of `cause` at `host`, paths `prefix0`, `prefix1`, ...
    static func add(_ groups: inout FailureGroups, _ count: Int, _ cause: FailureCause, host: String? = origin, prefix: String = "f") {
        for i in 0 ..< count {
            groups.add(path: "\(prefix)\(i).bin", cause: cause, host: host, message: "failure \(i) of \(prefix)")
        }
    }

    @Test func aMistypedBaseURLIsOneLineWithTheCountThenHowManyMoreAndWhere() {
        var groups = FailureGroups()
        Self.add(&groups, 354, .httpStatus(404), prefix: "a/b")
        let decision = policy.decide(groups)
        #expect(decision.shown.count == 1 && decision.more == 351 && decision.moreGroups == 0, "\(decision)")
        #expect(decision.lines(listing: Self.log) == [
            "354 files failed: server answered HTTP 404 (Not Found) from https://media.example.org (a/b0.bin, a/b1.bin, a/b2.bin, …)",
            "and 351 more failed files: every one is in /var/log/mirror/mirror.log",
        ])
    }

    @Test func aGroupOfOneIsItsFilesOwnLine() {
        var groups = FailureGroups()
        groups.add(path: "gone.bin", cause: .httpStatus(404), host: Self.origin,
                   message: "server answered HTTP 404 (Not Found) (last tried https://media.example.org/gone.bin)")
        let decision = policy.decide(groups)
        #expect(decision.more == 0)
        #expect(decision.lines(listing: Self.log) == ["gone.bin: server answered HTTP 404 (Not Found) (last tried https://media.example.org/gone.bin)"])
    }

    /// A server that could not be reached says nothing of the files: they are "not reached".
    @Test func filesWhoseServerWasNotReachedAreSaidSo() {
        var groups = FailureGroups()
        Self.add(&groups, 3, .unreachable)
        #expect(policy.decide(groups).lines(listing: Self.log).first?.hasPrefix("3 files not reached: cannot reach the server from https://media.example.org") == true,
                "\(policy.decide(groups).lines(listing: Self.log))")
    }

    @Test func failuresAllNamedInAHandfulOfLinesNeedNoMoreLine() {
        var groups = FailureGroups()
        Self.add(&groups, 3, .httpStatus(503))
        Self.add(&groups, 2, .checksumMismatch, prefix: "c")
        let lines = policy.decide(groups).lines(listing: Self.log)
        #expect(lines == [
            "3 files failed: server answered HTTP 503 (Service Unavailable) from https://media.example.org (f0.bin, f1.bin, f2.bin)",
            "2 files failed: checksum mismatch from https://media.example.org (c0.bin, c1.bin)",
        ])
    }

    @Test func manyCausesOrHostsAreCappedAtAHandfulOfLines() {
        var groups = FailureGroups()
        for host in 0 ..< 10 { Self.add(&groups, 1, .unreachable, host: "http://h\(host).example", prefix: "h\(host)-") }
        let decision = policy.decide(groups)
        let lines = decision.lines(listing: .status(manifest: "m.yaml", destination: "/srv/lab"))
        #expect(lines.count == policy.lines, "\(lines)")
        #expect(decision.shown.map(\.key.host) == (0 ..< 4).map { "http://h\($0).example" }, "a tie keeps the order of the first failure")
        #expect(lines.last == "and 6 more failed files (6 more causes or hosts): `mirror status m.yaml --dest /srv/lab` lists every one")
    }

    @Test func theLargestGroupsComeFirst() {
        var groups = FailureGroups()
        Self.add(&groups, 2, .stalled, prefix: "s")
        Self.add(&groups, 40, .httpStatus(404), host: "http://127.0.0.1:8080")
        Self.add(&groups, 2, .system(code: 5), host: nil, prefix: "l")
        let decision = policy.decide(groups)
        #expect(decision.shown.map(\.count) == [40, 2, 2])
        #expect(decision.shown.map(\.key.cause) == [.httpStatus(404), .stalled, .system(code: 5)])
        #expect(decision.more == 37 && decision.moreGroups == 0)
    }

    @Test func aGroupWithUnnamedFilesLeavesRoomForTheMoreLine() {
        var groups = FailureGroups()
        for code in [400, 401, 403, 404, 410] { Self.add(&groups, 1, .httpStatus(code), prefix: "\(code)-") }
        #expect(policy.decide(groups).lines(listing: Self.log).count == 5, "five groups of one: each named, no more line")
        Self.add(&groups, 3, .httpStatus(400), prefix: "again-")
        let decision = policy.decide(groups)
        let lines = decision.lines(listing: Self.log)
        #expect(lines.count == 5, "\(lines)")
        #expect(decision.shown.map(\.count) == [4, 1, 1, 1] && decision.more == 2 && decision.moreGroups == 1, "\(decision)")
        #expect(lines.last == "and 2 more failed files (1 more cause or host): every one is in /var/log/mirror/mirror.log")
        var one = FailureGroups()
        Self.add(&one, 4, .httpStatus(404))
        #expect(policy.decide(one).lines(listing: Self.log).last == "and 1 more failed file: every one is in /var/log/mirror/mirror.log")
    }

    @Test func failuresBeyondTheGroupsKeptAreCountedInTheMoreLine() {
        var groups = FailureGroups(maxGroups: 2)
        for host in 0 ..< 5 { Self.add(&groups, 1, .unreachable, host: "http://h\(host).example") }
        #expect(groups.groups.count == 2 && groups.ungrouped == 3 && groups.total == 5)
        let decision = policy.decide(groups)
        #expect(decision.shown.count == 2 && decision.more == 3, "\(decision)")
    }

    @Test func theLimitsHoldForSmallSettings() {
        let tight = FailureSummaryPolicy(lines: 0, pathsPerLine: 0)
        #expect(tight.lines == 2 && tight.pathsPerLine == 1)
        var groups = FailureGroups(pathsKept: 5)
        Self.add(&groups, 3, .shortBody)
        Self.add(&groups, 2, .tooMuchData)
        let decision = tight.decide(groups)
        #expect(decision.shown.count == 1 && decision.shown[0].paths == ["f0.bin"] && decision.more == 4)
        #expect(decision.lines(listing: Self.log).count == 2)
    }
}
