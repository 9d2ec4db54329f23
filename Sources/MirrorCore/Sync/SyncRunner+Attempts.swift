import MirrorKit
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// One attempt of an entry: a local copy or a delta when there is one, else its partial file
/// opened (or resumed) and its requests submitted to a transfer thread (``TransferPool``); and
/// what the finished requests mean for their entries.
extension SyncRunner {
    /// Opens `task`'s partial file under `DEST/.mirror/partial/` (a fresh one unless `resumeFrom`
    /// or `saved` says what an earlier run or a local copy left there), hashed by the next writer
    /// thread of the pool (``PartialWriterPool``).
    func openPartial(for task: EntryTask, resumeFrom: Int64 = 0, saved: PartialRecord? = nil) throws -> PartialFile {
        try PartialFile(identity: EntryIdentity(task.entry), name: task.partialName, folder: partialFolder,
                        folderDisplay: destination.displayState(".mirror/partial"), journal: writer,
                        writer: threads?.writers.writer(), resumeFrom: resumeFrom, saved: saved, naming: partialNaming)
    }

    /// Starts the next attempt of `task`: opens its partial file, picks a source, submits.
    func start(_ task: EntryTask) {
        task.move(to: .fetching)
        do {
            // Bytes already on this machine come first: they need no source, reachable or not.
            if task.partial == nil, copyLocally(task) {
                task.partial = try openPartial(for: task, resumeFrom: task.entry.size)
                task.partial?.sourceURL = task.attempt.copiedFrom.map { "file://" + $0 }
                verifyAndInstall(task)
                return
            }
            // A host that refused twice is not asked again in this run; the check comes before
            // any file is created, so a dead server leaves nothing behind (D3 in docs/faults.md).
            while let source = task.currentSource, reachability.isGivenUp(source) {
                task.history.skipped(.unreachable("\(redactedURL(source)) did not answer earlier in this run"))
                if !task.source.advance() { break }
            }
            if task.currentSource == nil && task.entry.size > 0 {
                giveUp(task)
                return
            }
            if task.partial == nil, let url = task.currentSource, startDelta(task, url: url), task.partial == nil { return }
            if task.partial == nil {
                let partial = try openPartial(for: task, resumeFrom: task.resumeOffset, saved: task.resume)
                if partial.length > 0, let record = task.resume {
                    partial.sourceURL = record.url
                    partial.validator = record.validator
                }
                if partial.keptAtResume > 0 {
                    summary.resumedFiles += 1
                    summary.resumedBytes += partial.keptAtResume
                    summary.rehashedBytes += partial.rehashedAtResume
                }
                task.partial = partial
            }
            guard let partial = task.partial else { return }
            if task.attempt.fromZero && partial.length > 0 { partial.restartFromZero() }
            task.attempt.fromZero = false
            if partial.isComplete {
                // Nothing left to fetch (an empty file, or a partial that was already whole).
                verifyAndInstall(task)
                return
            }
            guard let url = task.currentSource else {
                giveUp(task)
                return
            }
            // The validator belongs to the URL it came from (journaled with its credentials masked).
            let sameSource = partial.sourceURL.map { $0 == url || redactedURL($0) == redactedURL(url) } ?? false
            if !sameSource && partial.length > 0 {
                // Another source (a mirror, or a changed base_url): its validator cannot be compared
                // with the old one, so no If-Range is sent and its answer sets the validator anew.
                // The bytes may then come from two servers; the digest check catches a splice, and
                // the file is fetched again from zero (docs/faults.md, "resume on another source").
                partial.validator = nil
            }
            if partial.length == 0 && !partial.isSegmented
                && segmentPolicy.wantsSegments(size: task.entry.size, url: url, sourceRefusedRanges: task.segments.refused) {
                try partial.beginSegments(length: SegmentPolicy.segmentLength(size: task.entry.size, connections: options.segments))
            }
            task.attempt.begin(at: partial.length)
            if partial.isSegmented {
                try startSegments(task, url: url, ifRange: sameSource ? partial.validator : nil)
                return
            }
            let download = try Download(url: url, offset: partial.length, ifRange: sameSource ? partial.validator : nil,
                                        target: partial, settings: transferSettings(for: task, url: url))
            submit(download, for: task)
        } catch {
            stopOrFail(task, error)
        }
    }

    func submit(_ download: Download, for task: EntryTask) {
        task.downloads.append(download)
        scheduler.started(download, for: task)
        threads?.submit(download, for: task)
    }

    func handle(_ finished: [Download]) {
        for download in finished {
            guard let task = scheduler.ended(download) else { continue }
            task.downloads.removeAll { $0 === download }
            if download.segment != nil {
                handleSegment(download, of: task)
                continue
            }
            switch download.outcome ?? .failed(.cancelled) {
            case .complete:
                verifyAndInstall(task)
            case .rangeNotSatisfiable:
                if task.partial?.isComplete == true {
                    verifyAndInstall(task)
                } else {
                    task.attempt.fromZero = true
                    retry(task, after: .badContentRange("416 Range Not Satisfiable", expected: "bytes \(download.requestedOffset)-"))
                }
            case .failed(.cancelled):
                task.partial?.checkpoint()
                task.move(to: .leftForLaterRun)
                summary.pending += 1
            case .failed(.rangeIgnored):
                restartFromZero(task)
            case .failed(let failure):
                attemptFailed(task, failure)
            }
        }
    }

    /// The server answered a resume with the whole file (a 200: its validator changed, so the
    /// If-Range missed, or it has no ranges). Asked first: whether the manifest changed, which
    /// leaves the entry for the next run (``manifestChanged(under:partial:)``). Otherwise the entry
    /// starts over from zero at once, no back-off and no failure counted: the partial file is cut
    /// here, on the sync thread, after the journal forgets it (docs/journal.md, rule 1); the
    /// transfer thread never journals (docs/architecture.md, "Threads").
    func restartFromZero(_ task: EntryTask) {
        if let partial = task.partial, partial.length > 0, manifestChanged(under: task, partial: partial) { return }
        task.attempt.fromZero = true
        scheduler.enqueue(task)
    }
}
