import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// Which entry starts next, and when the run stops: the queue of entries ready to start, those
/// waiting out a back-off, the slots (`--jobs` entries, and connections for all files together),
/// the requests running, and when to wake (the deadline of ``RunStop``, which says whether the run stops).
///
/// It starts nothing and decides no retry: ``SyncRunner`` asks it which entry may start, tells it
/// which request runs for which entry, and asks it when to wake and whether to stop. Each request
/// is known only by its object identity, so the bookkeeping is tested without a server.
final class Scheduler {
    /// Entries with at least one request running at once (`--jobs`, at least one).
    let jobs: Int
    /// Requests at once, for every file together: `--jobs`, or `--segments` if more.
    let connectionLimit: Int
    /// Whether the run is ending, and its deadline (``RunStop``).
    let stop: RunStop
    /// Entries (and requests) that may start beyond ``jobs`` and ``connectionLimit``: their partial
    /// files are opened and their requests wait in the ``TransferEngine`` (which runs at most
    /// ``connectionLimit`` at once) to begin the moment a running one ends, without a round trip
    /// through this thread. ``freeConnections`` counts them as running: a segmented file widens
    /// only into connections that no waiting request is about to take.
    let readAhead: Int

    /// Entries ready to start, in order (``HeadQueue``: taking the first moves no other).
    private var queue = HeadQueue<EntryTask>()
    /// The plan's entries, which come before the queue: everything enqueued later (a retry, an
    /// entry a check found changed, a duplicate released) was appended after them before they
    /// waited here, and still starts after them.
    var planned: PlannedEntries?
    private(set) var waiting: [EntryTask] = []
    /// The entry each running request is for.
    private var requests: [ObjectIdentifier: EntryTask] = [:]
    /// Requests running per entry (an entry with none has no key).
    private var requestsPerTask: [ObjectIdentifier: Int] = [:]
    /// The loop sleeps at most this long, so it notices a stop signal soon.
    static let longestWait = 0.5

    init(jobs: Int, connectionLimit: Int, stop: RunStop, readAhead: Int = 0) {
        self.jobs = max(1, jobs)
        self.connectionLimit = max(1, connectionLimit)
        self.stop = stop
        self.readAhead = max(0, readAhead)
    }

    // MARK: The queue

    /// Entries of the queue ready to start, in order (after ``planned``'s).
    var ready: ArraySlice<EntryTask> { queue.remaining }

    /// The entry may start at the loop's next turn.
    func enqueue(_ task: EntryTask) {
        // A task made for the run starts ready; one that ran, waited or was held moves to it.
        if task.state != .ready { task.move(to: .ready) }
        queue.append(task)
    }

    /// The entry waits until `until`, a monotonic time (a back-off, `Retry-After`; `.infinity`:
    /// not again in this run).
    func park(_ task: EntryTask, until: Double) {
        task.move(to: .waiting(until: until))
        waiting.append(task)
    }

    /// Moves the waiting entries whose time has come to the end of the queue, in the order they waited.
    func promoteDue(now: Double) {
        guard !waiting.isEmpty else { return }
        var still: [EntryTask] = []
        for task in waiting {
            if task.notBefore <= now {
                task.move(to: .ready)
                queue.append(task)
            } else {
                still.append(task)
            }
        }
        waiting = still
    }

    /// The first ready entry, taken off the queue, when an entry slot and a connection are free.
    func nextToStart() -> EntryTask? {
        guard runningTasks < jobs + readAhead, requests.count < connectionLimit + readAhead else { return nil }
        if let planned, planned.remaining > 0 { return planned.next() }
        return queue.popFirst()
    }

    /// Entries queued or waiting, with their tasks: what a stop leaves for a later run (and the
    /// plan's entries not yet started, ``unstartedCount``).
    var unstarted: [EntryTask] { Array(ready) + waiting }
    var unstartedCount: Int { (planned?.remaining ?? 0) + ready.count + waiting.count }

    /// Entries that may start: the plan's and the queue's.
    var readyCount: Int { (planned?.remaining ?? 0) + ready.count }

    // MARK: Slots

    /// Entries with at least one request running.
    var runningTasks: Int { requestsPerTask.count }
    /// Requests running, for every entry together.
    var runningRequests: Int { requests.count }
    /// The entry of each running request: an entry once per request it runs.
    var activeTasks: [EntryTask] { Array(requests.values) }
    /// Connections still free within the limit (none or fewer when an entry's first request went past it).
    var freeConnections: Int { connectionLimit - requests.count }

    func started(_ request: AnyObject, for task: EntryTask) {
        requests[ObjectIdentifier(request)] = task
        requestsPerTask[ObjectIdentifier(task), default: 0] += 1
    }

    /// The entry a request that ended was for; nil for one unknown (already ended).
    /// The entry of a request still running, without ending it.
    func task(of request: AnyObject) -> EntryTask? { requests[ObjectIdentifier(request)] }

    func ended(_ request: AnyObject) -> EntryTask? {
        guard let task = requests.removeValue(forKey: ObjectIdentifier(request)) else { return nil }
        let key = ObjectIdentifier(task)
        let left = (requestsPerTask[key] ?? 1) - 1
        if left <= 0 { requestsPerTask.removeValue(forKey: key) } else { requestsPerTask[key] = left }
        return task
    }

    /// Nothing queued, waiting or running.
    var isIdle: Bool { requests.isEmpty && readyCount == 0 && waiting.isEmpty }

    // MARK: Time

    /// Seconds the loop may sleep: until the first waiting entry is due or the deadline, at most
    /// ``longestWait``, at least a millisecond.
    func timeUntilDue(now: Double) -> Double {
        var wait = Scheduler.longestWait
        if let next = waiting.map(\.notBefore).min() { wait = min(wait, max(0.001, next - now)) }
        if let deadline = stop.deadline { wait = min(wait, max(0.001, deadline - now)) }
        return wait
    }
}
