import Testing
@testable import MirrorCore

/// The token bucket under a timetable (``RateLimiter``), with a clock the test sets: the cap
/// follows the local time at the next look, in both directions, and never needs a restart.
struct RateLimiterTests {
    /// A clock the test moves (`Mon-13:59`), read by the limiter as it would read `localtime_r`.
    final class TestClock: @unchecked Sendable {
        var time = WeekTime(weekday: 1, hour: 13, minute: 59)
        var clock: LocalClock { LocalClock { [unowned self] in self.time } }
    }

    @Test func aBoundaryLiftsTheCapAndAnotherBringsItBack() throws {
        let clock = TestClock()
        let schedule = try RateSchedule(parsing: "Mon-00:00,1K Mon-14:00,off Mon-15:00,1K")
        let limiter = RateLimiter(schedule: schedule, clock: clock.clock, now: 100)
        #expect(limiter.rate == 1024)
        #expect(limiter.admit(16384, now: 100.5), "a piece is taken while the bucket holds a token")
        #expect(!limiter.admit(1, now: 100.6), "then the debt holds the transfer")
        #expect(limiter.wait(now: 100.6) > 0)

        clock.time = WeekTime(weekday: 1, hour: 14, minute: 0)
        #expect(!limiter.admit(1, now: 100.9), "the clock is read once a second, not at every piece")
        #expect(limiter.admit(1 << 30, now: 101.0), "the boundary lifts the cap at the next look")
        #expect(limiter.rate == nil)
        #expect(limiter.wait(now: 101.1) == 0)

        clock.time = WeekTime(weekday: 1, hour: 15, minute: 0)
        #expect(limiter.admit(1 << 30, now: 101.5), "the look is not due yet")
        #expect(!limiter.admit(1, now: 102.0), "the cap returns with an empty bucket: no credit from the hour without one")
        #expect(limiter.rate == 1024)
        #expect(limiter.wait(now: 102.0) <= 1.0, "the wait ends by the next look at the clock")
    }

    /// The plain `--limit-rate 2K`: the bucket starts empty and fills at the rate.
    @Test func oneRateIsABucketFilledAtThatRate() {
        let limiter = RateLimiter(bytesPerSecond: 2048, now: 0)
        #expect(limiter.rate == 2048)
        #expect(!limiter.admit(1, now: 0), "empty at the start")
        #expect(limiter.admit(4096, now: 0.01), "about 20 bytes of credit admit a whole piece")
        #expect(!limiter.admit(1, now: 0.02))
        #expect(abs(limiter.wait(now: 0.02) - (4096 - 20.48 - 20.48) / 2048 - 0.001) < 0.01)
    }
}
