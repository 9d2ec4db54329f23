import MirrorKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The error the test harness throws for anything that goes wrong outside the code under test
/// (a file that cannot be written, a process that cannot be started, a server that does not come
/// up).
///
/// The project forbids `try!` and force-unwraps on things from the disk or from processes, so every
/// such failure surfaces as one of these, and the message is meant to be read in a CI log without a
/// debugger: it says what was attempted, on which path, and what the system answered.
public struct HarnessError: Error, CustomStringConvertible {
    public let message: String

    public init(_ message: String) { self.message = message }

    /// An error for a failed system call, with `errno` rendered as text (read it before anything
    /// else can overwrite it).
    public static func posix(_ what: String, errno code: Int32 = errno) -> HarnessError {
        HarnessError("\(what): \(String(cString: strerror(code))) (errno \(code))")
    }

    public var description: String { message }
}

/// Seconds on the monotonic clock: used for deadlines and for `ProcessResult.wallSeconds`, never
/// for assertions (the project bans timing assertions; wall-clock time may jump).
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Sleeps for a short while; used by the bounded polling loops (process exit, server readiness).
func sleepSeconds(_ seconds: Double) {
    guard seconds > 0 else { return }
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
    var remaining = timespec()
    while nanosleep(&request, &remaining) == -1 && errno == EINTR { request = remaining }
}

/// The last `maxBytes` of `text`, cut at a line start when possible, for error messages that quote
/// a process's output without flooding the log.
func tail(_ text: String, maxBytes: Int = 4096) -> String {
    let utf8 = Array(text.utf8)
    guard utf8.count > maxBytes else { return text }
    var slice = utf8[(utf8.count - maxBytes)...]
    if let newline = slice.firstIndex(of: UInt8(ascii: "\n")) { slice = slice[(newline + 1)...] }
    return "[...]\n" + String(decoding: slice, as: UTF8.self)
}
