#if canImport(Glibc)
import Glibc
#endif
import MirrorKit

/// Where ``RateLimiter`` reads the local day and time that a `--limit-rate` timetable
/// (``RateSchedule``) is written in: `time(2)` broken down by `localtime_r(3)`, which applies `TZ`
/// or `/etc/localtime` and daylight saving, as cron does.
///
/// For tests only: with `MIRROR_TEST_LOCAL_TIME_FILE=PATH` in the environment, the time is read
/// from PATH instead (`Mon-13:59`, ``WeekTime``'s form) each time the limiter looks, so a test can
/// move a running sync across a timetable boundary without waiting for the wall clock; a file
/// that cannot be read or does not hold that form leaves the real clock in use.
struct LocalClock: Sendable {
    let read: @Sendable () -> WeekTime

    static let system = LocalClock {
        var now = time(nil)
        var parts = tm()
        // localtime_r fails only for a time_t beyond its year range (EOVERFLOW): not the clock's now.
        guard localtime_r(&now, &parts) != nil else { return WeekTime(weekday: 0, hour: 0, minute: 0) }
        return WeekTime(weekday: Int(parts.tm_wday), hour: Int(parts.tm_hour), minute: Int(parts.tm_min))
    }

    /// ``system``, or the test's file when `MIRROR_TEST_LOCAL_TIME_FILE` is set.
    static let process: LocalClock = {
        guard let raw = getenv("MIRROR_TEST_LOCAL_TIME_FILE") else { return system }
        let path = String(cString: raw)
        return LocalClock {
            guard let bytes = try? WholeFile.read(path, limit: 64),
                  let time = WeekTime(parsing: String(decoding: bytes, as: UTF8.self)) else { return system.read() }
            return time
        }
    }()
}
