#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import MirrorCore
@testable import MirrorFS

/// Failures are grouped by a typed cause and the host, never by their words (``FailureCause``,
/// ``FailureGroups``; docs/cli.md, "Output").
@Suite struct FailureGroupsTests {
    @Test func messagesThatDifferInTheirWordsShareACauseOfOneType() {
        let refused = FailureCause(TransferFailure.network(code: 7, message: "Failed to connect to a port 1", transient: true))
        let again = FailureCause(TransferFailure.network(code: 7, message: "Failed to connect to b port 2", transient: true))
        #expect(refused == again && refused == .network(code: 7))
        #expect(FailureCause(TransferFailure.httpStatus(404, retryAfter: nil)) != FailureCause(TransferFailure.httpStatus(410, retryAfter: nil)))
        #expect(FailureCause(TransferFailure.checksumMismatch("expected 1, got 2")) == FailureCause(TransferFailure.checksumMismatch("expected 3, got 4")))
        #expect(FailureCause(TransferFailure.writeFailed(SystemError("write", "x.part", code: EIO))) == .system(code: EIO))
        #expect(FailureCause(SystemError("open", "y", code: ENOENT) as Error) == .system(code: ENOENT))
        #expect(FailureCause(HarnessLikeError() as Error) == .other)
    }

    @Test func oneGroupPerCauseAndHost() {
        var groups = FailureGroups()
        groups.add(path: "a", cause: .httpStatus(404), host: "https://one.example", message: "404 at a")
        groups.add(path: "b", cause: .httpStatus(404), host: "https://one.example", message: "404 at b, other words")
        groups.add(path: "c", cause: .httpStatus(404), host: "https://two.example", message: "404 at c")
        groups.add(path: "d", cause: .httpStatus(503), host: "https://one.example", message: "503 at d")
        #expect(groups.total == 4)
        #expect(groups.groups.map(\.count) == [2, 1, 1])
        #expect(groups.groups[0].paths == ["a", "b"] && groups.groups[0].firstMessage == "404 at a")
    }

    @Test func aCauseOnThisMachineIsOneGroupWhateverTheSource() {
        var groups = FailureGroups()
        groups.add(path: "a", cause: .system(code: EIO), host: "https://one.example", message: "x")
        groups.add(path: "b", cause: .system(code: EIO), host: nil, message: "y")
        groups.add(path: "c", cause: .blocked, host: nil, message: "z")
        #expect(groups.groups.map(\.count) == [2, 1])
        #expect(groups.groups.allSatisfy { $0.key.host == nil })
    }

    @Test func onlyTheFirstFewPathsAreKept() {
        var groups = FailureGroups(pathsKept: 2)
        for i in 0 ..< 1000 { groups.add(path: "p\(i)", cause: .stalled, host: "http://h", message: "m\(i)") }
        #expect(groups.groups.count == 1 && groups.groups[0].count == 1000 && groups.groups[0].paths == ["p0", "p1"])
    }

    @Test func theCauseIsSaidInWordsOfItsType() {
        #expect(FailureCause.httpStatus(404).words == "server answered HTTP 404 (Not Found)")
        #expect(FailureCause.network(code: 6).words.hasPrefix("network error: ") && FailureCause.network(code: 6).words.hasSuffix("(libcurl error 6)"))
        #expect(FailureCause.network(code: 0).words == "network error")
        #expect(FailureCause.system(code: EIO).words == "cannot read or write on this machine: Input/output error")
        #expect(FailureCause.cannotDelete(code: nil).words == "cannot delete")
    }

    @Test func theStatusCommandIsOneShellWordPerArgument() {
        #expect(FailureListing.status(manifest: "https://media.example.org/lab/m.yaml", destination: "/srv/lab-media").words
            == "`mirror status https://media.example.org/lab/m.yaml --dest /srv/lab-media` lists every one")
        #expect(FailureListing.status(manifest: "my m.yaml", destination: nil).words == "`mirror status 'my m.yaml'` lists every one")
        #expect(FailureListing.shellWord("it's") == #"'it'\''s'"#)
        #expect(FailureListing.shellWord("") == "''")
        #expect(FailureListing.shellWord("$(x)") == "'$(x)'")
    }
}

private struct HarnessLikeError: Error {}
