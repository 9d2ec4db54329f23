#if canImport(Glibc)
import Glibc
#endif

/// SIGINT and SIGTERM stop a run the way a deadline does: transfers are cancelled, their progress
/// checkpointed, and the run exits 75 so the next one continues. The handler only stores the
/// signal number and the time (`clock_gettime` is async-signal-safe, signal-safety(7)); the sync
/// loop polls ``received`` at least twice a second.
///
/// A second signal within ``graceSeconds`` of the first is the same request again, not an
/// insistence: `timeout(1)` sends SIGTERM to the child and then to its whole process group, and a
/// terminal's Ctrl-C reaches a wrapper script and mirror alike. Only a signal after that ends the
/// process at once (the default action, raised again).
public enum StopSignal {
    nonisolated(unsafe) public private(set) static var received: Int32 = 0
    nonisolated(unsafe) private static var firstAt: Int = 0
    static let graceSeconds = 1

    public static func install() {
        for sig in [SIGINT, SIGTERM] {
            signal(sig) { number in
                var now = timespec()
                clock_gettime(CLOCK_MONOTONIC, &now)
                if StopSignal.received == 0 {
                    StopSignal.received = number
                    StopSignal.firstAt = now.tv_sec
                } else if now.tv_sec - StopSignal.firstAt > StopSignal.graceSeconds {
                    signal(number, SIG_DFL)
                    raise(number)
                }
            }
        }
    }

    /// Sleeps `seconds` in steps of at most 0.1 s; false when a stop signal arrived first, so that
    /// SIGINT or SIGTERM end a wait (`Jitter`, a signature's second look) promptly.
    public static func pause(_ seconds: Double) -> Bool {
        let end = monotonicSeconds() + seconds
        while received == 0 {
            let left = end - monotonicSeconds()
            if left <= 0 { return true }
            let step = min(left, 0.1)
            var ts = timespec(tv_sec: Int(step), tv_nsec: Int((step - Double(Int(step))) * 1e9))
            nanosleep(&ts, nil)
        }
        return false
    }
}
