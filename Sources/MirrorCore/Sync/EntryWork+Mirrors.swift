import MirrorKit
import MirrorModel

/// A large file from several mirrors at once (a Metalink file's `<url>`s): which mirrors its
/// segments may still go to (``MirrorSpread``), a mirror whose request failed set aside while the
/// others carry the file on, and a wrong piece (``PieceCheck``) undone and fetched again from a
/// mirror that did not send it (docs/manifest.md, "Metalink 4").
extension EntryWork {
    /// Whether `task`'s segments go to several mirrors at once: a Metalink entry, fetched from its
    /// own URLs (not a `--prefer` cache, which is there to spare them), with at least two live.
    func spreads(_ task: EntryTask) -> Bool {
        guard case .mirrored = task.entry.url, options.segments > 1, let current = task.currentSource,
              !isPreferredOnly(current, of: task.entry) else { return false }
        return liveMirrors(task).count > 1
    }

    /// The entry's own URLs that its segments may still go to.
    func liveMirrors(_ task: EntryTask) -> [String] {
        task.mirrors.live(manifest.sources(for: task.entry), givenUp: { reachability.isGivenUp($0) })
    }

    /// A request of a file spread over mirrors failed: unless a retry of the segment on the same
    /// mirror is due (``SegmentPolicy/afterSegmentFailure(_:received:requested:entryFailing:stopping:)``),
    /// the mirror is set aside for this attempt and the segment goes to another. Returns false
    /// when the failure is the entry's to handle (no other mirror, a write error, the run stopping).
    func restsMirror(after outcome: DownloadOutcome, of download: Download, task: EntryTask) -> Bool {
        guard let partial = task.partial, partial.spreadsSources, !stop.isEnding, task.segments.failure == nil else { return false }
        let failure: TransferFailure
        switch outcome {
        case .complete, .failed(.cancelled), .failed(.writeFailed):
            return false
        case .notModified:
            failure = .httpStatus(304, retryAfter: nil)
        case .rangeNotSatisfiable:
            failure = .badContentRange("416 Range Not Satisfiable", expected: "bytes \(download.requestedOffset)-\(download.requestedEnd ?? 0)")
        case .failed(let other):
            failure = other
        }
        let requested = download.requestedEnd.map { $0 + 1 - download.requestedOffset } ?? 1
        if segmentPolicy.afterSegmentFailure(failure, received: download.bytesWritten, requested: requested,
                                             entryFailing: false, stopping: false) == .retrySegment {
            return false
        }
        task.mirrors.rest(download.url)
        _ = reachability.noteFailure(at: download.url, failure)
        guard !liveMirrors(task).isEmpty else { return false }
        task.history.record(failure)
        report.warning("\(task.entry.path): \(redactedURL(download.url)): \(failure); its segments go to the other mirrors")
        continueSegments(task)
        return true
    }

    /// A file whose every byte is in holds a wrong piece (``SyncRunner``'s install found it).
    func wrongPiece(_ task: EntryTask) -> [EntryEffect] { take { wrongPieceFound(task) } }

    /// The writer found a piece that does not match its hash, and every request of the file is
    /// back: the mirrors that sent its bytes are dropped for this file, the file is rewound to the
    /// piece (with whatever else they sent past it), and the piece is fetched again from another
    /// mirror. With none left, the entry fails as a checksum mismatch.
    func wrongPieceFound(_ task: EntryTask) {
        guard let partial = task.partial, let wrong = partial.wrongPiece else { return }
        // Whoever sent the piece; with no origin known (never expected), the current source, so
        // that every wrong piece drops a mirror and the entry ends after as many as it has.
        var senders = partial.sources(of: wrong.range)
        if senders.isEmpty, let current = task.currentSource { senders = [redactedURL(current)] }
        task.mirrors.drop(senders)
        let kind = task.entry.pieces?.kind.rawValue ?? "piece"
        let detail = "piece \(wrong.index) (bytes \(wrong.range.lowerBound)-\(wrong.range.upperBound - 1)) did not match its \(kind) hash"
        task.history.record(.checksumMismatch(detail))
        let lost = partial.rewind(piece: wrong.range, dropping: senders)
        let from = senders.sorted().joined(separator: ", ")
        report.warning("\(task.entry.path): \(detail) (sent by \(from)); not asked again for this file, \(Formatting.bytes(lost)) to fetch again")
        if stop.isEnding {
            // The rewind was checkpointed: the next run goes on from the piece, without that mirror's bytes.
            task.move(to: .leftForLaterRun)
            emit(.pending)
            return
        }
        if partial.spreadsSources, !liveMirrors(task).isEmpty {
            continueSegments(task)
            return
        }
        while let current = task.currentSource, task.mirrors.dropped.contains(redactedURL(current)) {
            if !task.source.advance(resetFailures: false) { break }
        }
        guard task.currentSource != nil else { return giveUp(task) }
        emit(.queue(task))
    }
}
