extension ConsoleReport {
    /// Called by the sync loop at each turn (it turns at least 10 times a second while a progress
    /// block is shown): redraws the block when 0.1 s have passed since the last redraw.
    ///
    /// The byte counts are read from each task's ``PartialFile`` while the transfer thread appends
    /// to it. They are plain aligned 64-bit integers only ever increased there (or reset by a
    /// restart), so a read at worst sees a value a moment old; they only feed this display.
    func transferProgress(tasks: [EntryTask], active: [EntryTask], finished: Int) {
        guard let progress else { return }
        let now = monotonicSeconds()
        guard progress.isDue(now: now) else { return }
        var done: Int64 = 0, total: Int64 = 0, received: Int64 = 0
        for task in tasks {
            let size = task.entry.size
            total += size
            done += min(size, task.partial?.length ?? task.resumeOffset)
            received += task.partial?.bytesReceived ?? 0
        }
        let files = active.map {
            ProgressSnapshot.File(path: $0.entry.path, done: $0.partial?.length ?? 0, size: $0.entry.size)
        }.sorted { $0.path < $1.path }
        let snapshot = ProgressSnapshot(active: files, filesDone: min(finished, tasks.count), filesTotal: tasks.count,
                                        bytesDone: done, bytesTotal: total,
                                        rate: progress.measure(now: now, bytesReceived: received))
        progress.draw(snapshot, now: now)
    }
}
