import MirrorKit
import MirrorState

/// The tasks of one run (``EntryTask``): every task made, what the installed ones added up to
/// once let go, and the tasks held back for another entry's content. A value the loop
/// (``SyncRunner``) owns on the sync thread; which of them runs when is the ``Scheduler``'s.
struct RunTasks {
    /// The tasks of the run but those installed and dropped (``retire(_:)``).
    private(set) var all: [EntryTask] = []
    /// What the installed tasks let go added up to.
    private(set) var retired = RetiredTasks()
    /// Entries waiting for another entry of the run to fetch their content, by that entry's path
    /// (the loop's `holdDuplicates`, docs/cli.md "Reuse by content").
    private var waitingForContent: [PathKey: [EntryTask]] = [:]

    /// Lists a task made for the run.
    mutating func add(_ task: EntryTask) { all.append(task) }

    /// An installed entry's task is let go: its bytes are counted in ``retired``, its partial file
    /// (closed by the commit) and the task itself freed. Without this a first sync of 10^6 files
    /// held every task and partial file to the end (about 1 KB each; docs/performance.md, "A first
    /// sync of many files"). The list drops retired tasks once they are half of it.
    mutating func retire(_ task: EntryTask) {
        retired.count += 1
        retired.bytes = retired.bytes.addingClamped(task.entry.size)
        retired.received += task.bytesReceived
        task.partial = nil
        task.move(to: .installed)
        retired.stillListed += 1
        if retired.stillListed >= 1024 && retired.stillListed * 2 >= all.count {
            all.removeAll { $0.isRetired }
            retired.stillListed = 0
        }
    }

    /// Bytes received in this run, the retired tasks' and the others'.
    var bytesReceived: Int64 { retired.received + all.reduce(0) { $1.isRetired ? $0 : $0 + $1.bytesReceived } }

    // MARK: Held for content

    /// `task` waits until the entry at `leader` ends.
    mutating func hold(_ task: EntryTask, behind leader: String) {
        task.move(to: .heldForContent)
        waitingForContent[PathKey(leader), default: []].append(task)
    }

    /// Whether any task waits for another's content.
    var holdsAny: Bool { !waitingForContent.isEmpty }

    /// The tasks that waited for the entry at `path`, which ended; they wait no more.
    mutating func release(behind path: String) -> [EntryTask] {
        guard !waitingForContent.isEmpty else { return [] }
        return waitingForContent.removeValue(forKey: PathKey(path)) ?? []
    }

    /// Every task still waiting, in no particular order; they wait no more.
    mutating func releaseAll() -> [EntryTask] {
        defer { waitingForContent = [:] }
        return waitingForContent.values.flatMap { $0 }
    }

    /// Tasks still waiting for content.
    var heldCount: Int { waitingForContent.values.reduce(0) { $0 + $1.count } }

    /// The run stopped before their content's entry ended: the waiting tasks are left for a later run.
    func leaveHeld() {
        for tasks in waitingForContent.values { for task in tasks { task.move(to: .leftForLaterRun) } }
    }
}

/// What the entries installed so far add up to, once their tasks are let go (``RunTasks/retire(_:)``):
/// a run that fetches 10^6 files holds no object per file already in place.
struct RetiredTasks {
    /// Entries installed.
    var count = 0
    /// Their sizes.
    var bytes: Int64 = 0
    /// Bytes received for them in this run (a chunk delta's index included).
    var received: Int64 = 0
    /// Of `count`, tasks still in the run's list until its next compaction.
    var stillListed = 0
}
