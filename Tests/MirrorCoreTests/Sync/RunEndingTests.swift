import Testing
@testable import MirrorCore
@testable import MirrorFS
#if canImport(Glibc)
import Glibc
#endif

/// ``RunEnding``: the result a run ends with, from what stopped it and its failures
/// (docs/cli.md, "Exit codes"), and when it ran to its end (deletions may go ahead).
@Suite struct RunEndingTests {
    func summary(failed: Int = 0, deletionRefused: String? = nil) -> SyncSummary {
        var summary = SyncSummary()
        summary.failed = failed
        summary.deletionRefused = deletionRefused
        return summary
    }

    @Test func aStopSaysWhyWhateverElseHappened() {
        var ending = RunEnding()
        ending.stoppedReason = "deadline passed"
        ending.fatal = SystemError("write", "x", code: ENOSPC)
        #expect(ending.result(summary: summary(failed: 3), failedUnreachable: 0) == .incomplete("deadline passed"))
        #expect(!ending.ranToItsEnd)
    }

    @Test func failuresThatAreAllAnUnreachableHostAreTryAgainLater() {
        var ending = RunEnding()
        #expect(ending.result(summary: summary(failed: 2), failedUnreachable: 2) == .incomplete("no source could be reached"))
        #expect(ending.result(summary: summary(failed: 2), failedUnreachable: 1) == .failed, "one failure said something else")
        ending.notTried = 4
        #expect(ending.result(summary: summary(), failedUnreachable: 0) == .incomplete("no source could be reached"),
                "entries never asked for, their host gone")
        #expect(!ending.ranToItsEnd)
    }

    @Test func failuresARefusedDeletionOrADestinationStopFail() {
        var ending = RunEnding()
        #expect(ending.result(summary: summary(), failedUnreachable: 0) == .ok)
        #expect(ending.ranToItsEnd)
        #expect(ending.result(summary: summary(deletionRefused: "would delete 90%"), failedUnreachable: 0) == .failed)
        ending.spaceStop = SystemError("fit", "x", code: ENOSPC)
        #expect(ending.result(summary: summary(), failedUnreachable: 0) == .failed)
        ending = RunEnding()
        ending.fatal = SystemError("write", "x", code: EROFS)
        #expect(ending.result(summary: summary(), failedUnreachable: 0) == .failed)
        #expect(!ending.ranToItsEnd)
    }

    @Test func theFirstDestinationErrorAndTheFirstStopAreKept() {
        var ending = RunEnding()
        ending.keepFirstFatal(SystemError("write", "a", code: ENOSPC))
        ending.keepFirstFatal(SystemError("write", "b", code: EROFS))
        #expect(ending.fatal?.code == ENOSPC)
        ending.keepFirstStop("the manifest changed during the run")
        ending.keepFirstStop("stopped early")
        #expect(ending.stoppedReason == "the manifest changed during the run")
    }
}
