/// One thread that runs jobs one at a time, in the order they were submitted: a queue on one
/// ``SystemThread``, kept in a ``Locked`` and waited on with its condition variable.
///
/// The model is swift-nio's `EventLoop.execute(_:)`: a job is a `@Sendable` closure, so the
/// compiler checks that whatever it carries to this thread may go there, and the queue, the
/// thread's one shared state, is `Sendable` without an `@unchecked` of its own. What a job makes
/// comes back the same way, through `Sendable` state the submitter reads after ``drain()``.
///
/// The thread holds the queue, not this object: the last reference going ends the thread
/// (``shutdown()`` from `deinit`), after the jobs already queued.
package final class WorkerThread: Sendable {
    package typealias Job = @Sendable () -> Void

    private struct Queue: Sendable {
        var jobs: [Job] = []
        /// The next job to take; the jobs before it ran or are running.
        var head = 0
        /// A job is running on the thread.
        var running = false
        var stopping = false
        var exited = false

        var hasWork: Bool { head < jobs.count }
        var isBusy: Bool { hasWork || running }
    }

    private let queue = Locked(Queue())
    /// What a taken job's slot holds until the array is emptied.
    private static let taken: Job = {}
    /// Seconds the thread spent waiting for a job.
    private let idle = IdleClock()

    /// Starts the thread, named `name` (``SystemThread/start(name:stackSize:_:)``).
    package init(name: String, stackSize: Int? = nil) {
        SystemThread.start(name: name, stackSize: stackSize) { [queue, idle] in
            WorkerThread.run(queue, idle: idle)
        }
    }

    deinit { shutdown() }

    /// Queues `job`, to run after every job submitted before it.
    package func submit(_ job: @escaping Job) {
        queue.withLock { $0.jobs.append(job) }
        queue.broadcast()
    }

    /// Whether a job is queued or running.
    package var isBusy: Bool { queue.withLock { $0.isBusy } }

    /// Waits until no job is queued or running.
    package func drain() {
        queue.withLock(waitingUntil: { !$0.isBusy || $0.exited }) { _ in }
    }

    /// Seconds the thread has waited for a job since it started (a wait in progress included).
    package var idleSeconds: Double { idle.seconds }

    /// Runs the jobs already queued, then ends the thread and waits for it to end. Jobs
    /// submitted afterwards never run.
    package func shutdown() {
        queue.withLock { $0.stopping = true }
        queue.broadcast()
        queue.withLock(waitingUntil: { $0.exited }) { _ in }
    }

    private static func run(_ queue: Locked<Queue>, idle: IdleClock) {
        while true {
            let job: Job? = queue.withLock(waitingUntil: { $0.hasWork || $0.stopping }, idle: idle) { q in
                guard q.hasWork else {
                    q.exited = true
                    return nil
                }
                // The slot lets go of the job at once (and of what it captured, when it has run);
                // the array is emptied whenever the thread catches up, and never moves otherwise.
                let job = q.jobs[q.head]
                q.jobs[q.head] = WorkerThread.taken
                q.head += 1
                if !q.hasWork {
                    q.jobs.removeAll(keepingCapacity: true)
                    q.head = 0
                }
                q.running = true
                return job
            }
            guard let job else {
                queue.broadcast()
                return
            }
            job()
            queue.withLock { $0.running = false }
            queue.broadcast()
        }
    }
}
