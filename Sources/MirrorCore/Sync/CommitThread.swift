import MirrorKit

/// Runs the group commits of a run (``Installer/commit(_:)``) on a thread of their own, one at a
/// time, so that the sync thread goes on starting and verifying downloads meanwhile.
///
/// A commit of a few hundred small files is two `syncfs`, a `renameat2` and two `fstatat` per file
/// and a journal `fdatasync`: tens of milliseconds in which, on the sync thread, no new download
/// started and the transfer thread ran dry (measured: 5000 × 16 KiB with `--jobs 16`, the
/// transfer thread idle in every commit). The steps and their order are those of a commit on the
/// sync thread (docs/journal.md, "Group commit of installs"); only the thread differs. Results
/// come back through ``takeDone()``, and the sync thread reports them; ``waitIdle()`` is the
/// barrier before the run's last commit and its end.
final class CommitThread {
    private let condition = Condition()
    // Guarded by `condition`:
    private var job: (() -> Installer.Committed)?
    private var running = false
    private var done: [Installer.Committed] = []
    private var stopping = false
    private var exited = false
    /// Called on the commit thread after each commit, to wake the sync thread's wait.
    private let finished: () -> Void

    init(finished: @escaping () -> Void) {
        self.finished = finished
        SystemThread.start(name: "mirror-commit") { [unowned self] in self.run() }
    }

    deinit { shutdown() }

    /// Whether a commit is queued or running.
    var isBusy: Bool {
        condition.lock()
        defer { condition.unlock() }
        return job != nil || running
    }

    /// Queues `work`; call only when not ``isBusy``.
    func start(_ work: @escaping () -> Installer.Committed) {
        condition.lock()
        job = work
        condition.broadcast()
        condition.unlock()
    }

    /// The commits that finished since the last call, in order.
    func takeDone() -> [Installer.Committed] {
        condition.lock()
        defer { condition.unlock() }
        let out = done
        done.removeAll()
        return out
    }

    /// Waits until no commit is queued or running.
    func waitIdle() {
        condition.lock()
        while job != nil || running { condition.wait() }
        condition.unlock()
    }

    /// Finishes a queued commit, then ends the thread.
    func shutdown() {
        condition.lock()
        guard !exited else { condition.unlock(); return }
        stopping = true
        condition.broadcast()
        while !exited { condition.wait() }
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while job == nil && !stopping { condition.wait() }
            guard let work = job else {
                exited = true
                condition.broadcast()
                condition.unlock()
                return
            }
            job = nil
            running = true
            condition.unlock()

            let result = work()

            condition.lock()
            done.append(result)
            running = false
            condition.broadcast()
            condition.unlock()
            finished()
        }
    }
}
