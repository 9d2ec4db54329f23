import Dispatch

/// One value computed on a thread of its own while the caller does something else, then waited
/// for: `--dry-run` reads DEST's journal while the manifest is parsed (docs/performance.md,
/// "10^6 entries"). The two are independent and each takes about a core for a second at 10^6
/// entries, so on two cores the run takes the longer of the two instead of their sum.
///
/// Sendable, unchecked: `result` is written once, by the thread, before it signals `done`, and
/// read only after a wait on `done` (the semaphore orders the write before every read); `done`
/// is a `DispatchSemaphore`, made for any thread. `Value` is `Sendable` and `work` `@Sendable`:
/// both go from one thread to another.
package final class Background<Value: Sendable>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    /// Written once by the thread before `done` is signalled; read only after waiting on it.
    private var result: Value?

    package init(_ work: @escaping @Sendable () -> Value) {
        // Journal reading recurses no deeper than the run's own thread does.
        SystemThread.start(name: "mirror-read", stackSize: 1 << 20) { [self] in
            result = work()
            done.signal()
        }
    }

    /// Waits for the value (at once if it is ready, and at once on every later call: the signal
    /// taken is given back).
    package func value() -> Value {
        done.wait()
        done.signal()
        // The thread always stores a value before it signals.
        guard let result else { preconditionFailure("Background signalled without a value") }
        return result
    }
}
