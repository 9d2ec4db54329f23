@testable import MirrorModel
import Testing
@testable import MirrorCore
#if canImport(Glibc)
import Glibc
#endif

/// The queue, the slots, the deadline and the stop, without a server: requests are plain objects.
@Suite struct SchedulerTests {
    final class Request {}

    static func task(_ path: String) -> EntryTask {
        EntryTask(entry: ManifestEntry(path: path, url: .relative(path), size: 10, digests: [:]),
                  sources: ["http://127.0.0.1/" + path], replacing: false)
    }

    /// A task whose attempt failed, as the run parks it (``EntryState``: only a fetching entry waits).
    static func failedAttempt(_ path: String) -> EntryTask {
        let task = Self.task(path)
        task.move(to: .fetching)
        return task
    }

    /// `--jobs 2`: a third entry waits for a slot, whatever the connection limit.
    @Test func entriesStartInOrderWithinTheJobSlots() {
        let scheduler = Scheduler(jobs: 2, connectionLimit: 8, stop: RunStop(deadline: nil))
        let tasks = ["a", "b", "c"].map { Self.task($0) }
        tasks.forEach(scheduler.enqueue)
        let first = scheduler.nextToStart()
        #expect(first === tasks[0])
        let a = Request()
        scheduler.started(a, for: tasks[0])
        let second = scheduler.nextToStart()
        #expect(second === tasks[1])
        scheduler.started(Request(), for: tasks[1])
        #expect(scheduler.nextToStart() == nil, "both entry slots are taken")
        #expect(scheduler.ended(a) === tasks[0])
        #expect(scheduler.ended(a) == nil, "a request ends once")
        let third = scheduler.nextToStart()
        #expect(third === tasks[2])
    }

    /// Thousands of entries leave the queue in order, the taken ones dropped as it goes (the
    /// queue takes from a moving head, not `removeFirst`); a promotion in the middle keeps the
    /// order of what is left.
    @Test func aLongQueueKeepsItsOrderAsItIsTaken() {
        let scheduler = Scheduler(jobs: 1, connectionLimit: 1, stop: RunStop(deadline: nil))
        let tasks = (0 ..< 5000).map { Self.task("f\($0)") }
        tasks.forEach(scheduler.enqueue)
        var taken: [EntryTask] = []
        func takeOne() {
            guard let next = scheduler.nextToStart() else { return }
            taken.append(next)
            let request = Request()
            scheduler.started(request, for: next)
            _ = scheduler.ended(request)
        }
        for _ in 0 ..< 3000 { takeOne() }
        #expect(scheduler.ready.count == 2000)
        #expect(scheduler.ready.first === tasks[3000])
        let late = Self.failedAttempt("late")
        scheduler.park(late, until: 0)
        scheduler.promoteDue(now: 1)
        while !scheduler.ready.isEmpty { takeOne() }
        let expected = tasks + [late]
        #expect(taken.count == expected.count && zip(taken, expected).allSatisfy { $0 === $1 })
        #expect(scheduler.unstarted.isEmpty && scheduler.isIdle)
    }

    /// A segmented entry holds one entry slot however many requests it runs, but every request
    /// takes a connection.
    @Test func aSegmentedEntryTakesOneSlotAndManyConnections() {
        let scheduler = Scheduler(jobs: 4, connectionLimit: 3, stop: RunStop(deadline: nil))
        let big = Self.task("big")
        let small = Self.task("small")
        scheduler.enqueue(big)
        scheduler.enqueue(small)
        _ = scheduler.nextToStart()
        let requests = [Request(), Request(), Request()]
        for request in requests { scheduler.started(request, for: big) }
        #expect(scheduler.runningTasks == 1 && scheduler.runningRequests == 3 && scheduler.freeConnections == 0)
        #expect(scheduler.activeTasks.count == 3)
        #expect(scheduler.nextToStart() == nil, "no connection is free")
        _ = scheduler.ended(requests[0])
        #expect(scheduler.runningTasks == 1)
        let next = scheduler.nextToStart()
        #expect(next === small)
        _ = scheduler.ended(requests[1])
        _ = scheduler.ended(requests[2])
        #expect(scheduler.runningTasks == 0 && scheduler.isIdle)
    }

    @Test func aWaitingEntryReturnsToTheQueueWhenItsTimeComes() {
        let scheduler = Scheduler(jobs: 1, connectionLimit: 1, stop: RunStop(deadline: nil))
        let later = Self.failedAttempt("later")
        let sooner = Self.failedAttempt("sooner")
        scheduler.park(later, until: 10)
        scheduler.park(sooner, until: 5)
        #expect(!scheduler.isIdle)
        #expect(scheduler.timeUntilDue(now: 4.9) < 0.11, "wakes when the first is due")
        #expect(scheduler.timeUntilDue(now: 0) == Scheduler.longestWait)
        scheduler.promoteDue(now: 6)
        #expect(scheduler.ready.map(\.entry.path) == ["sooner"] && scheduler.waiting.map(\.entry.path) == ["later"])
        #expect(scheduler.timeUntilDue(now: 20) == 0.001, "at least a millisecond")
        scheduler.promoteDue(now: 10)
        #expect(scheduler.unstarted.map(\.entry.path) == ["sooner", "later"])
    }

    @Test func theDeadlineAndTheSignalsStopTheRun() {
        var now = 99.0
        var signal: Int32 = 0
        let stop = RunStop(deadline: 100, signal: { signal }, clock: { now })
        let scheduler = Scheduler(jobs: 1, connectionLimit: 1, stop: stop)
        #expect(stop.reason() == nil && !stop.isEnding)
        #expect(scheduler.timeUntilDue(now: 99.8) < 0.21, "wakes at the deadline")
        now = 100
        #expect(stop.reason() == "deadline passed" && stop.isEnding, "the deadline ends the run before the loop has seen it")
        now = 1
        signal = SIGTERM
        #expect(stop.reason() == "terminated (SIGTERM)" && stop.isEnding)
        signal = SIGINT
        #expect(stop.reason() == "interrupted (SIGINT)")
        signal = 0
        #expect(!stop.isEnding)
        stop.stop()
        #expect(stop.isStopped && stop.isEnding && stop.reason() == nil, "stopped by the run itself: no deadline or signal to name")
    }

    @Test func slotsAreAtLeastOne() {
        let scheduler = Scheduler(jobs: 0, connectionLimit: 0, stop: RunStop(deadline: nil))
        #expect(scheduler.jobs == 1 && scheduler.connectionLimit == 1)
    }
}
