/// Seconds one thread has spent waiting, counted by that thread around each wait and read by
/// others, a wait in progress included: the writer waiting for work (`PartialWriter`) and the
/// transfer thread asleep in `curl_multi_poll` (`TransferEngine`), the two facts a segmented
/// file widens on (`SegmentPolicy.widen(waited:transferWaited:running:width:)`).
package final class IdleClock: @unchecked Sendable {
    private let lock = Lock()
    private var total = 0.0
    /// When the wait in progress began; 0 when the thread is not waiting.
    private var since = 0.0

    package init() {}

    /// Called by the thread just before it waits.
    package func beginWait() {
        lock.withLock { since = monotonicSeconds() }
    }

    /// Called by the thread once the wait is over.
    package func endWait() {
        lock.withLock {
            total += monotonicSeconds() - since
            since = 0
        }
    }

    package var seconds: Double {
        lock.withLock { total + (since > 0 ? monotonicSeconds() - since : 0) }
    }
}
