import MirrorKit

/// What the progress block counts at one turn of the run's loop, read from its entries by the
/// run (``RunProgress``): the report knows no entry, only these numbers.
struct ProgressCounts {
    var files: [ProgressSnapshot.File]
    var filesDone: Int
    var filesTotal: Int
    var bytesDone: Int64
    var bytesTotal: Int64
    /// Bytes received in this run, for the rate.
    var received: Int64
    /// The entries waiting out a back-off, for the note under the files.
    var waiting: [ProgressNote.Waiting]
}

extension ConsoleReport {
    /// Called by the sync loop at each turn (it turns at least 10 times a second while a progress
    /// block is shown): redraws the block when 0.1 s have passed since the last redraw, asking
    /// `counts` only then.
    func transferProgress(_ counts: () -> ProgressCounts) {
        guard let progress else { return }
        let now = monotonicSeconds()
        guard progress.isDue(now: now) else { return }
        let counts = counts()
        let snapshot = ProgressSnapshot(active: counts.files, filesDone: min(counts.filesDone, counts.filesTotal),
                                        filesTotal: counts.filesTotal, bytesDone: counts.bytesDone, bytesTotal: counts.bytesTotal,
                                        rate: progress.measure(now: now, bytesReceived: counts.received),
                                        note: ProgressNote.line(counts.waiting, now: now))
        progress.draw(snapshot, now: now)
    }
}
