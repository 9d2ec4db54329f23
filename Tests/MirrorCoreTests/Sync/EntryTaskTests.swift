import Testing
@testable import MirrorCore

/// The small values an entry's state is made of, each on its own.
@Suite struct EntryTaskTests {
    @Test func theSourceCursorMovesOnAndForgetsFailuresOnlyWhenAsked() {
        var cursor = SourceCursor(urls: ["http://a/f", "http://b/f"])
        #expect(cursor.current == "http://a/f" && cursor.hasAnother)
        cursor.failuresWithoutProgress = 2
        let moved = cursor.advance(resetFailures: false)
        #expect(moved)
        #expect(cursor.current == "http://b/f" && !cursor.hasAnother && cursor.failuresWithoutProgress == 2)
        let none = cursor.advance()
        #expect(!none)
        #expect(cursor.current == nil && cursor.failuresWithoutProgress == 0)
    }

    @Test func anAttemptStartsWhereTheFileStands() {
        var attempts = Attempts()
        attempts.begin(at: 0)
        attempts.begin(at: 4096)
        #expect(attempts.count == 2 && attempts.lengthAtStart == 4096 && !attempts.fromZero)
    }

    /// Only failures that say nothing against the content leave the entry "unreachable" (exit 75).
    @Test func theHistoryTellsAnUnreachableEndFromAContentOne() {
        var history = FailureHistory()
        history.record(.unreachable("connection refused"))
        #expect(history.endedUnreachable)
        history.record(.network(code: 56, message: "reset", transient: true))
        #expect(!history.endedUnreachable, "the last failure was not 'cannot reach'")
        history.record(.unreachable("connection refused"))
        #expect(history.endedUnreachable)

        var content = FailureHistory()
        content.record(.httpStatus(404, retryAfter: nil))
        content.record(.unreachable("connection refused"))
        #expect(!content.endedUnreachable, "a 404 said something against the source")

        var skipped = FailureHistory()
        skipped.skipped(.unreachable("http://a did not answer earlier in this run"))
        #expect(skipped.skippedUnreachable && skipped.endedUnreachable)
    }

    @Test func theSameWrongBytesTwiceFromOneSourceAreItsContent() {
        var history = FailureHistory()
        let first = history.wrongBytes(from: "http://a/f", digest: "11", detail: "expected sha256 00, got 11")
        let other = history.wrongBytes(from: "http://b/f", digest: "11", detail: "expected sha256 00, got 11")
        let again = history.wrongBytes(from: "http://a/f", digest: "11", detail: "expected sha256 00, got 11")
        let changed = history.wrongBytes(from: "http://a/f", digest: "22", detail: "expected sha256 00, got 22")
        #expect(!first && !other && again && !changed)
        #expect(history.checksumFailures == 4 && !history.onlyUnreachable)
        #expect(history.last == .checksumMismatch("expected sha256 00, got 22"))
    }

    @Test func theFirstSegmentFailureStandsUntilTaken() {
        var segments = SegmentState()
        segments.fail(.rangeIgnored)
        segments.fail(.cancelled)
        let taken = segments.takeFailure()
        #expect(taken == .rangeIgnored && segments.failure == nil)
    }
}
