/// Seconds one thread has spent waiting, counted by that thread around each wait and read by
/// others, a wait in progress included: the writer waiting for work (`PartialWriter`) and the
/// transfer thread asleep in `curl_multi_poll` (`TransferEngine`), the two facts a segmented
/// file widens on (`SegmentPolicy.widen(waited:transferWaited:running:width:runRequests:)`).
package final class IdleClock: Sendable {
    private struct Waits {
        var total = 0.0
        /// When the wait in progress began; 0 when the thread is not waiting.
        var since = 0.0
    }

    private let waits = Locked(Waits())

    package init() {}

    /// Called by the thread just before it waits.
    package func beginWait() {
        waits.withLock { $0.since = monotonicSeconds() }
    }

    /// Called by the thread once the wait is over.
    package func endWait() {
        waits.withLock {
            $0.total += monotonicSeconds() - $0.since
            $0.since = 0
        }
    }

    package var seconds: Double {
        waits.withLock { $0.total + ($0.since > 0 ? monotonicSeconds() - $0.since : 0) }
    }
}
