import MirrorKit
import MirrorModel

/// The entries the plan gave to fetch, in manifest order, each made into an ``EntryTask`` only
/// when it comes up to start (``Scheduler/nextToStart()``).
///
/// Why: a first sync of 10^6 files made 10^6 tasks at planning (about 520 bytes each with their
/// source URLs) and held them until each was installed: about 1.1 GB at the start
/// (docs/performance.md, "A first sync of many files"). An entry waiting here is 8 bytes, its
/// index in the manifest. An entry that resumes an earlier run's bytes has its task made at once
/// (it holds the journal's record) and keeps its place in the order.
final class PlannedEntries {
    private let entries: [ManifestEntry]
    private let makeTask: (ManifestEntry, Bool) -> EntryTask
    /// `index << 1 | replacing` for an entry whose task is not made, `-1 - k` for `made[k]`.
    private var list = HeadQueue<Int>()
    /// Tasks made at planning, each let go (nil) once taken.
    private var made: [EntryTask?] = []
    /// Entries still here whose tasks are not made, and their sizes: the progress display counts
    /// them beside the run's tasks (a task made at planning is among those already).
    private(set) var unmade = 0
    private(set) var unmadeBytes: Int64 = 0

    /// `makeTask(entry, replacing)` makes the task of an entry as it comes up (and lists it
    /// among the run's tasks).
    init(entries: [ManifestEntry], makeTask: @escaping (ManifestEntry, Bool) -> EntryTask) {
        self.entries = entries
        self.makeTask = makeTask
    }

    var remaining: Int { list.count }

    /// The manifest's entry at `index`, to fetch from zero.
    func append(index: Int, replacing: Bool) {
        list.append(index << 1 | (replacing ? 1 : 0))
        unmade += 1
        unmadeBytes = unmadeBytes.addingClamped(entries[index].size)
    }

    /// An entry whose task is made already (a resume).
    func append(_ task: EntryTask) {
        made.append(task)
        list.append(-made.count)
    }

    /// The next entry's task, made now if it was not.
    func next() -> EntryTask? {
        list.popFirst().map(take)
    }

    /// Each entry still here, with its task when it has one, in order.
    func forEach(_ body: (ManifestEntry, EntryTask?) -> Void) {
        for item in list.remaining {
            if item < 0, let task = made[-1 - item] { body(task.entry, task) } else if item >= 0 { body(entries[item >> 1], nil) }
        }
    }

    /// Takes out the entries `pick` chooses, their tasks made, in order; the others keep theirs.
    func withdraw(where pick: (ManifestEntry, EntryTask?) -> Bool) -> [EntryTask] {
        let picked = list.remaining.filter { item in
            item < 0 ? made[-1 - item].map { pick($0.entry, $0) } ?? false : pick(entries[item >> 1], nil)
        }
        let removing = Set(picked)  // each item is one entry's, and unique
        list.removeAll { removing.contains($0) }
        return picked.map(take)
    }

    /// The item's task, made now if it was not; a task made at planning is let go here.
    private func take(_ item: Int) -> EntryTask {
        if item < 0, let task = made[-1 - item] {
            made[-1 - item] = nil
            return task
        }
        unmade -= 1
        unmadeBytes -= entries[item >> 1].size
        return makeTask(entries[item >> 1], item & 1 == 1)
    }
}
