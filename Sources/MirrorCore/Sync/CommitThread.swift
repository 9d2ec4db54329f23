import MirrorKit

/// Runs the group commits of a run (``InstallCommit``) on a thread of their own (a
/// ``WorkerThread``), one at a time, so that the sync thread goes on starting and verifying
/// downloads meanwhile.
///
/// A commit of a few hundred small files is two `syncfs`, a `renameat2` and two `fstatat` per file
/// and a journal `fdatasync`: tens of milliseconds in which, on the sync thread, no new download
/// started and the transfer thread ran dry (measured: 5000 × 16 KiB with `--jobs 16`, the
/// transfer thread idle in every commit). The steps and their order are those of a commit on the
/// sync thread (docs/journal.md, "Group commit of installs"); only the thread differs. What goes to
/// the thread is `Sendable` (the commit and each file's ``InstallCommit/Placement``); the entries
/// and partial files stay here, on the sync thread, and meet their outcomes in ``takeDone()``,
/// which the sync thread reports. ``waitIdle()`` is the barrier before the run's last commit and
/// its end. Only the sync thread holds it.
final class CommitThread {
    private let thread = WorkerThread(name: "mirror-commit")
    /// Outcomes of the batches the thread finished, in order; the thread's one way back.
    private let done = Locked<[InstallCommit.Outcome]>([])
    /// The batches handed to the thread whose outcomes were not taken yet, oldest first.
    private var inFlight: [[InstallBatch.Item]] = []
    /// Called on the commit thread after each commit, to wake the sync thread's wait.
    private let finished: @Sendable () -> Void

    init(finished: @escaping @Sendable () -> Void) {
        self.finished = finished
    }

    /// Whether a commit is queued or running: one handed over whose outcome is not in yet.
    var isBusy: Bool { done.withLock { $0.count } < inFlight.count }

    /// Hands `items` to the thread, to be committed by `commit` after any batch before them.
    func start(_ items: [InstallBatch.Item], with commit: InstallCommit) {
        inFlight.append(items)
        let placements = items.map(\.placement)
        let (done, finished) = (self.done, self.finished)
        thread.submit {
            let outcome = commit.commit(placements)
            done.withLock { $0.append(outcome) }
            finished()
        }
    }

    /// The commits that finished since the last call, in order.
    func takeDone() -> [Installer.Committed] {
        let outcomes = done.withLock { list in
            defer { list.removeAll() }
            return list
        }
        return outcomes.map { Installer.committed(inFlight.removeFirst(), $0) }
    }

    /// Waits until no commit is queued or running.
    func waitIdle() { thread.drain() }

    /// Finishes a queued commit, then ends the thread.
    func shutdown() { thread.shutdown() }
}
