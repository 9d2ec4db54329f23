import Testing
import MirrorCore
import MirrorKit

/// `--deadline`, `--stall-timeout` and `--jitter` values (docs/cli.md, "Values of options").
@Suite struct TimeSpanTests {
    @Test func numbersWithUnitsAreRead() throws {
        #expect(try TimeSpan(parsing: "45m").seconds == 2700)
        #expect(try TimeSpan(parsing: "2h").seconds == 7200)
        #expect(try TimeSpan(parsing: "1h30m").seconds == 5400)
        #expect(try TimeSpan(parsing: "500ms").seconds == 0.5)
        #expect(try TimeSpan(parsing: "1.5s").seconds == 1.5)
        #expect(try TimeSpan(parsing: "1d").seconds == 86400)
        #expect(try TimeSpan(parsing: " 90S ").seconds == 90)
    }

    /// `--deadline 45` in a cron line meant minutes and stopped after 45 s.
    @Test func aNumberWithoutAUnitIsRefusedWithTheUnitsToAdd() {
        for bare in ["3", "45", "1.5"] {
            #expect(throws: ArgumentValueError.durationWithoutUnit(bare)) { try TimeSpan(parsing: bare) }
        }
        let message = ArgumentValueError.durationWithoutUnit("45").description
        #expect(message.contains("add a unit"))
        #expect(message.contains("45s, 45m or 45h"))
    }

    /// Zero is the same in every unit (`--jitter 0` turns the delay off), so it needs none.
    @Test func zeroNeedsNoUnit() throws {
        #expect(try TimeSpan(parsing: "0").seconds == 0)
        #expect(try TimeSpan(parsing: "0s").seconds == 0)
    }

    @Test func anythingElseIsNotADuration() {
        for text in ["", "m", "5x", "-5s", "1e3s", "1.2.3s", "5s3", "soon", "inf"] {
            #expect(throws: ArgumentValueError.notADuration, "\(text.debugDescription)") { try TimeSpan(parsing: text) }
        }
        #expect(ArgumentValueError.notADuration.description.contains("90s, 45m, 2h or 1h30m"))
    }

    @Test func aMinimumIsEnforcedAndNamed() throws {
        let second = TimeSpan(seconds: 1)
        #expect(try TimeSpan(parsing: "1s", atLeast: second).seconds == 1)
        #expect(throws: ArgumentValueError.durationBelow(minimum: second)) { try TimeSpan(parsing: "500ms", atLeast: second) }
        #expect(throws: ArgumentValueError.durationWithoutUnit("30")) { try TimeSpan(parsing: "30", atLeast: second) }
        #expect(ArgumentValueError.durationBelow(minimum: second).description == "the duration must be at least 1s")
    }

    /// `--help` shows defaults through `description`, so it must read back to the same value.
    @Test func theDescriptionReadsBack() throws {
        for seconds in [0, 0.25, 1, 30, 90, 2700, 5400, 7200, 86400] as [Double] {
            let span = TimeSpan(seconds: seconds)
            #expect(try TimeSpan(parsing: span.description) == span, "\(span)")
        }
        #expect(TimeSpan(seconds: 30).description == "30s")
        #expect(TimeSpan(seconds: 2700).description == "45m")
    }
}
