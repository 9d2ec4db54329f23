import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// The one answer to "is the run stopping?": the deadline (`--deadline`) passed, SIGINT or
/// SIGTERM arrived (``StopSignal``), or the run stopped itself (a fatal error, the end of the loop).
///
/// Every part of a run that must give up when the run ends asks here: the loop before it starts
/// an entry, a segmented file before it widens, a delta being prepared (chunking an old copy,
/// fetching its index), a dry run's delta estimates (docs/architecture.md, "The run in a page").
/// Three answers that each knew part of it let a delta start after the deadline and a segment
/// widen after a signal. The signal and the clock are passed in, so the rule is tested without
/// either.
final class RunStop {
    /// Monotonic time at which the run stops (`--deadline` after its start), if any.
    let deadline: Double?
    private let signal: () -> Int32
    private let clock: () -> Double
    /// Set by ``stop()``: the run is ending whatever the clock and the signals say.
    private(set) var isStopped = false

    init(deadline: Double?, signal: @escaping () -> Int32 = { StopSignal.received },
         clock: @escaping () -> Double = monotonicSeconds) {
        self.deadline = deadline
        self.signal = signal
        self.clock = clock
    }

    /// Why the run must stop now, or nil: the deadline passed, or a signal came.
    func reason() -> String? {
        if let deadline, clock() >= deadline { return "deadline passed" }
        let number = signal()
        if number != 0 { return number == SIGTERM ? "terminated (SIGTERM)" : "interrupted (SIGINT)" }
        return nil
    }

    /// Whether the run is ending: stopped, or a reason to stop has come (seen by the loop or not).
    var isEnding: Bool { isStopped || reason() != nil }

    /// The run stops: nothing new starts after this.
    func stop() { isStopped = true }
}
