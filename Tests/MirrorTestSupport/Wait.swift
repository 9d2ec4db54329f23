#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Waits on conditions, not on clocks: a test that needs a state (a partial file of N bytes, a pid
/// in the lock file, a line in a log) polls for that state instead of sleeping a fixed time and
/// assuming it. A fixed sleep is too short on a loaded machine (the test then checks the wrong
/// moment) and too long everywhere else.
///
/// The condition is polled every 10 ms on the monotonic clock; past `timeout` seconds the wait
/// throws a ``HarnessError`` that names the condition, so a CI log says what never happened.
/// A condition that may become impossible (the process that should produce the state exited)
/// should say so itself (`... || !run.isRunning`) and leave the verdict to the test's checks.
public enum Wait {
    /// How often a condition is polled.
    public static let pollInterval = 0.01

    /// Returns once `condition` holds; throws naming `what` when it has not within `timeout` s.
    /// `detail` is evaluated only on a timeout and added to the message (a child's stderr, say).
    public static func until(_ what: String, timeout: Double = 60, detail: @autoclosure () -> String = "",
                             _ condition: () throws -> Bool) throws {
        let deadline = monotonicSeconds() + timeout
        while try !condition() {
            if monotonicSeconds() >= deadline {
                let more = detail()
                throw HarnessError("timed out after \(timeout) s waiting until \(what)" + (more.isEmpty ? "" : ": \(more)"))
            }
            sleepSeconds(pollInterval)
        }
    }

    /// Returns the first non-nil value of `value`; throws naming `what` when there is none within
    /// `timeout` s.
    public static func `for`<T>(_ what: String, timeout: Double = 60, detail: @autoclosure () -> String = "",
                                _ value: () throws -> T?) throws -> T {
        var found: T?
        try until(what, timeout: timeout, detail: detail()) {
            found = try value()
            return found != nil
        }
        guard let found else { throw HarnessError("waiting for \(what): the value vanished") }
        return found
    }
}
