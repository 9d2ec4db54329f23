import MirrorKit

/// Segmented downloads, the entry's side: which ranges to request, when a file widens
/// (``SegmentPolicy``), and what one segment's end means for the whole entry.
extension EntryWork {
    /// Starts requests for the lowest open segments that have none running: up to the file's
    /// current width (at most `--segments`), within the connection limit (at least one, so a large
    /// file never waits for small ones to finish).
    func startSegments(_ task: EntryTask, url: String, ifRange: String?) throws {
        guard let partial = task.partial else { return }
        // The first quarter second of the width is counted from the first request, not from the
        // loop turn that prepared the file (preallocation can take a while).
        if task.segments.widthDecidedAt == nil, let writer = partial.writer {
            task.segments.widthDecidedAt = (monotonicSeconds(), writer.idleSeconds, threads.idleSeconds(of: task))
        }
        let running = Set(task.downloads.compactMap(\.segment))
        // Several mirrors at once: each segment picks its own (``MirrorSpread``), with its validator.
        let mirrors = partial.spreadsSources ? liveMirrors(task) : nil
        // At most --segments requests for this file, and (beyond its first) within the connection limit.
        var room = min(min(task.segments.width, options.segments) - task.downloads.count, max(1, freeConnections()))
        for open in partial.openSegments() where !running.contains(open.index) && room > 0 {
            var source = url
            var validator = ifRange
            if let mirrors {
                guard let picked = task.mirrors.pick(live: mirrors, recorded: partial.recordedSource(of: open.index),
                                                     running: task.downloads.map(\.url)) else { break }
                source = picked
                validator = partial.heldValidator(for: picked)
            }
            let download = try Download(url: source, offset: open.from, ifRange: validator, target: partial,
                                        settings: transferSettings(for: task, url: source), segment: (open.index, open.end))
            partial.noteOrigin(segment: open.index, from: open.from, url: source)
            submit(download, for: task)
            room -= 1
        }
    }

    /// Whether `task` is a segmented download that may widen (``widen(_:now:)``).
    func mayWiden(_ task: EntryTask) -> Bool {
        task.segments.width < options.segments && task.segments.failure == nil && task.downloads.first?.segment != nil
    }

    /// Widens `task` when its hash waited for bytes while its transfer thread waited for the
    /// network (``SegmentPolicy/widen(waited:transferWaited:running:width:runRequests:)``). The loop asks one
    /// file at a time and carries out its requests before the next, so each sees the connections
    /// left. Returns the seconds until its next decision is due (nil: it has no hashing thread).
    func widen(_ task: EntryTask, now: Double) -> (due: Double?, effects: [EntryEffect]) {
        // The idle time of the thread that hashes this file.
        guard let writer = task.partial?.writer else { return (nil, []) }
        let effects = take { decideWidth(task, idleNow: writer.idleSeconds, now: now) }
        return ((task.segments.widthDecidedAt?.time ?? now) + SegmentPolicy.widenInterval - now, effects)
    }

    private func decideWidth(_ task: EntryTask, idleNow: Double, now: Double) {
        // Set by the file's first startSegments.
        guard let last = task.segments.widthDecidedAt else { return }
        let span = now - last.time
        // The sync loop wakes on time, give or take a millisecond.
        guard span >= SegmentPolicy.widenInterval * 0.95 else { return }
        let transferIdleNow = threads.idleSeconds(of: task)
        task.segments.widthDecidedAt = (now, idleNow, transferIdleNow)
        guard let width = segmentPolicy.widen(waited: (idleNow - last.idle) / span,
                                              transferWaited: (transferIdleNow - last.transferIdle) / span,
                                              running: task.downloads.count, width: task.segments.width,
                                              runRequests: options.connectionPolicy.requests - freeConnections()) else { return }
        task.segments.width = width
        continueSegments(task)
    }

    /// One segment's request ended. A segment that dropped after real progress is asked for again
    /// at once, on its own; any other failure stops the entry's other segments and, once they are
    /// all back, is handled like a failed attempt at the whole entry. A source that ignores or
    /// garbles ranges turns the entry into one stream from its contiguous prefix.
    func handleSegment(_ download: Download, of task: EntryTask) {
        let outcome = download.outcome ?? .failed(.cancelled)
        if task.partial?.spreadsSources == true, case .complete = outcome { task.mirrors.lastFreed = download.url }
        if task.partial?.wrongPiece != nil {
            // A wrong piece stops the file's every request; the file is rewound once all are back.
            if case .complete = outcome {} else { segmentFailed(task, .checksumMismatch("a piece did not match its hash")) }
        } else if restsMirror(after: outcome, of: download, task: task) {
            // Another mirror carries the segment on (``MirrorSpread``).
        } else {
            handleSegmentOutcome(outcome, of: download, task: task)
        }
        guard task.downloads.isEmpty, let partial = task.partial else { return }
        if partial.wrongPiece != nil {
            _ = task.segments.takeFailure()
            wrongPieceFound(task)
        } else if let failure = task.segments.takeFailure() {
            if failure == .rangeIgnored || failure.distrustsRanges {
                partial.abandonSegments()
                task.segments.refused = true
            }
            attemptFailed(task, failure)
        } else if partial.isComplete {
            emit(.install(task))
        } else if stop.isEnding {
            partial.checkpoint()
            task.move(to: .leftForLaterRun)
            emit(.pending)
        } else if task.currentSource != nil {
            // A segment ended cleanly short of its end (cancelled by nothing we know): continue.
            continueSegments(task)
        } else {
            giveUp(task)
        }
    }

    private func handleSegmentOutcome(_ outcome: DownloadOutcome, of download: Download, task: EntryTask) {
        switch outcome {
        case .complete:
            // A delta's ranges are small and few: each one finished is journaled (docs/journal.md,
            // rule 3), so a kill costs at most the ranges in flight, not everything since the
            // layout (a checkpoint otherwise comes every 8 MiB).
            if task.partial?.isDelta == true { task.partial?.checkpoint() }
            // Segments the connection limit held back start as others finish.
            if task.segments.failure == nil && !stop.isEnding, task.partial?.isComplete == false { continueSegments(task) }
        case .failed(.cancelled):
            break
        case .notModified:
            // A segment is never asked with a refused file's condition (``Download``).
            segmentFailed(task, .httpStatus(304, retryAfter: nil))
        case .rangeNotSatisfiable:
            segmentFailed(task, .badContentRange("416 Range Not Satisfiable",
                                                 expected: "bytes \(download.requestedOffset)-\(download.requestedEnd ?? 0)"))
        case .failed(let failure):
            let action = segmentPolicy.afterSegmentFailure(failure, received: download.bytesWritten,
                                                           requested: download.requestedEnd.map { $0 + 1 - download.requestedOffset } ?? 1,
                                                           entryFailing: task.segments.failure != nil, stopping: stop.isEnding)
            if action == .retrySegment,
               let url = task.currentSource, let partial = task.partial {
                task.attempt.count += 1
                task.source.failuresWithoutProgress = 0
                do {
                    try startSegments(task, url: url, ifRange: partial.heldValidator(for: url))
                } catch {
                    segmentFailed(task, .network(code: 0, message: "\(error)", transient: true))
                }
            } else {
                segmentFailed(task, failure)
            }
        }
    }

    /// Starts what the file's width allows of its open segments, from its current source.
    func continueSegments(_ task: EntryTask) {
        guard let url = task.currentSource, let partial = task.partial else { return }
        do { try startSegments(task, url: url, ifRange: partial.heldValidator(for: url)) } catch { stopOrFail(task, error) }
    }

    func segmentFailed(_ task: EntryTask, _ failure: TransferFailure) {
        task.segments.fail(failure)
        threads.transfers.cancel(task.downloads)
    }
}
