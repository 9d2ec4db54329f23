#if canImport(Glibc)
import Glibc
#endif

/// SIGINT and SIGTERM stop a run the way a deadline does: transfers are cancelled, their progress
/// checkpointed, and the run exits 75 so the next one continues. The handler only stores the
/// signal number (the one async-signal-safe thing to do) and restores the default action, so a
/// second Ctrl-C ends the process at once; the sync loop polls ``received`` at least twice a second.
public enum StopSignal {
    nonisolated(unsafe) public private(set) static var received: Int32 = 0

    public static func install() {
        for sig in [SIGINT, SIGTERM] {
            signal(sig) { number in
                StopSignal.received = number
                signal(number, SIG_DFL)
            }
        }
    }
}
