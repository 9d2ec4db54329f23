/// What the progress block shows of a run, read from its tasks (``ProgressCounts``).
///
/// The byte counts are read from each task's ``PartialFile`` while the transfer thread appends
/// to it. They are plain aligned 64-bit integers only ever increased there (or reset by a
/// restart), so a read at worst sees a value a moment old; they only feed this display.
enum RunProgress {
    /// One line per file: `active` holds a task once per request it runs (a segmented file runs several).
    static func files(_ active: [EntryTask]) -> [ProgressSnapshot.File] {
        var seen = Set<ObjectIdentifier>()
        return active.compactMap { task -> ProgressSnapshot.File? in
            guard seen.insert(ObjectIdentifier(task)).inserted else { return nil }
            return ProgressSnapshot.File(path: task.entry.path, done: task.partial?.length ?? 0, size: task.entry.size,
                                         connections: max(1, task.downloads.count))
        }.sorted { $0.path < $1.path }
    }

    /// `retired`: the entries installed so far, whose tasks are no longer in `tasks` (``RunTasks/retire(_:)``);
    /// `planned`: the plan's entries whose tasks are not made yet (``PlannedEntries``).
    static func counts(tasks: [EntryTask], retired: RetiredTasks = RetiredTasks(), planned: (count: Int, bytes: Int64) = (0, 0),
                       active: [EntryTask], waiting: [EntryTask] = [], finished: Int) -> ProgressCounts {
        var done = retired.bytes, total = retired.bytes + planned.bytes, received = retired.received
        for task in tasks where !task.isRetired {
            let size = task.entry.size
            total += size
            done += min(size, task.partial?.length ?? task.resumeOffset)
            received += task.bytesReceived  // as ``RetiredTasks/received`` counts it
        }
        return ProgressCounts(files: files(active), filesDone: finished,
                              filesTotal: tasks.count - retired.stillListed + retired.count + planned.count,
                              bytesDone: done, bytesTotal: total, received: received,
                              waiting: waiting.map { ProgressNote.Waiting(stalled: $0.history.last?.isStall == true, notBefore: $0.notBefore) })
    }
}
