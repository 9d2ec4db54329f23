import Testing
@testable import MirrorKit
import MirrorTestSupport

/// The one generic worker thread (``WorkerThread``) and the waits of ``Locked`` it is built on:
/// jobs run one at a time in the order submitted, ``WorkerThread/drain()`` returns only once all
/// of them ran, and ``WorkerThread/shutdown()`` runs what is queued before the thread ends.
struct WorkerThreadTests {
    @Test func jobsRunInOrderAndDrainWaitsForAll() {
        let worker = WorkerThread(name: "mirror-test")
        defer { worker.shutdown() }
        let seen = Locked<[Int]>([])
        for i in 0 ..< 500 {
            worker.submit { seen.withLock { $0.append(i) } }
        }
        worker.drain()
        #expect(!worker.isBusy)
        #expect(seen.withLock { $0 } == Array(0 ..< 500))
    }

    /// A job that is still running keeps the thread busy: ``WorkerThread/drain()`` waits for its end.
    @Test func drainWaitsForTheRunningJob() throws {
        let worker = WorkerThread(name: "mirror-test")
        defer { worker.shutdown() }
        let gate = Locked(false)
        let done = Locked(false)
        worker.submit {
            gate.withLock(waitingUntil: { $0 }) { _ in }
            done.withLock { $0 = true }
        }
        try Wait.until("the job is running", timeout: 10) { worker.isBusy }
        gate.withLock { $0 = true }
        gate.broadcast()
        worker.drain()
        #expect(done.withLock { $0 })
    }

    @Test func shutdownRunsWhatIsQueuedFirst() {
        let worker = WorkerThread(name: "mirror-test")
        let count = Locked(0)
        for _ in 0 ..< 100 { worker.submit { count.withLock { $0 += 1 } } }
        worker.shutdown()
        #expect(count.withLock { $0 } == 100)
        worker.shutdown()  // a second shutdown returns at once
    }

    /// The thread waits for work without spinning, and counts that time as idle.
    @Test func anIdleThreadCountsItsWait() throws {
        let worker = WorkerThread(name: "mirror-test")
        defer { worker.shutdown() }
        try Wait.until("the worker's idle clock runs", timeout: 10) {
            let before = worker.idleSeconds
            return worker.idleSeconds > before
        }
    }
}
