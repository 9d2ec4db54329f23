import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// `--jitter DURATION`: a random delay before a run starts, so that a hundred machines whose cron
/// fires at the same minute do not all ask the server in the same second.
///
/// The delay is drawn uniformly from [0, DURATION) with the system's random generator
/// (`SystemRandomNumberGenerator`, i.e. `getrandom(2)`: machines started from one image still draw
/// differently). It is slept in steps of at most 0.1 s so that SIGINT or SIGTERM
/// (``StopSignal``) end it promptly. It runs before the manifest is fetched and before the lock is
/// taken: a waiting run holds nothing.
public enum Jitter {
    /// A delay in [0, maximum) seconds; 0 when `maximum` is 0.
    public static func draw(upTo maximum: Double) -> Double {
        guard maximum > 0 else { return 0 }
        return Double.random(in: 0..<maximum)
    }

    /// Sleeps `seconds`; false when a stop signal arrived first.
    public static func sleep(_ seconds: Double) -> Bool { StopSignal.pause(seconds) }
}
