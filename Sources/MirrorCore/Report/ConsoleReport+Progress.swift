import MirrorKit

extension ConsoleReport {
    /// Called by the sync loop at each turn (it turns at least 10 times a second while a progress
    /// block is shown): redraws the block when 0.1 s have passed since the last redraw.
    ///
    /// The byte counts are read from each task's ``PartialFile`` while the transfer thread appends
    /// to it. They are plain aligned 64-bit integers only ever increased there (or reset by a
    /// restart), so a read at worst sees a value a moment old; they only feed this display.
    /// One line per file: `active` holds a task once per request it runs (a segmented file runs several).
    static func progressFiles(_ active: [EntryTask]) -> [ProgressSnapshot.File] {
        var seen = Set<ObjectIdentifier>()
        return active.compactMap { task -> ProgressSnapshot.File? in
            guard seen.insert(ObjectIdentifier(task)).inserted else { return nil }
            return ProgressSnapshot.File(path: task.entry.path, done: task.partial?.length ?? 0, size: task.entry.size,
                                         connections: max(1, task.downloads.count))
        }.sorted { $0.path < $1.path }
    }

    /// `retired`: the entries installed so far, whose tasks are no longer in `tasks` (``SyncRunner/retire(_:)``);
    /// `planned`: the plan's entries whose tasks are not made yet (``PlannedEntries``).
    func transferProgress(tasks: [EntryTask], retired: RetiredTasks = RetiredTasks(), planned: (count: Int, bytes: Int64) = (0, 0),
                          active: [EntryTask], waiting: [EntryTask] = [], finished: Int) {
        guard let progress else { return }
        let now = monotonicSeconds()
        guard progress.isDue(now: now) else { return }
        var done = retired.bytes, total = retired.bytes + planned.bytes, received = retired.received
        for task in tasks where !task.isRetired {
            let size = task.entry.size
            total += size
            done += min(size, task.partial?.length ?? task.resumeOffset)
            received += task.bytesReceived  // as ``RetiredTasks/received`` counts it
        }
        let files = ConsoleReport.progressFiles(active)
        let filesTotal = tasks.count - retired.stillListed + retired.count + planned.count
        let snapshot = ProgressSnapshot(active: files, filesDone: min(finished, filesTotal), filesTotal: filesTotal,
                                        bytesDone: done, bytesTotal: total,
                                        rate: progress.measure(now: now, bytesReceived: received),
                                        note: ProgressNote.line(waiting.map {
                                            ProgressNote.Waiting(stalled: $0.history.last?.isStall == true, notBefore: $0.notBefore)
                                        }, now: now))
        progress.draw(snapshot, now: now)
    }
}

/// What the entries installed so far add up to, once their tasks are let go (``SyncRunner/retire(_:)``):
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
