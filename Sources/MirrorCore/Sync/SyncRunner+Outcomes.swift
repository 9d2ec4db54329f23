import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// How an entry's attempt ends, the runner's side: a retry on the same source or the next one
/// (``RetryPolicy`` decides), giving up, or a failure recorded for the summary, the journal and
/// `mirror status`.
extension SyncRunner {
    /// Decides what follows a failed attempt: the same source after a back-off, the next source, or
    /// giving up. Retries are bounded per source by attempts that made no progress, so a connection
    /// that drops every few hundred megabytes still finishes, and a dead one does not loop.
    func retry(_ task: EntryTask, after failure: TransferFailure) {
        task.history.record(failure)
        if failure.distrustsRanges { task.attempt.fromZero = true }
        let hostFailures = reachability.noteFailure(at: task.currentSource, failure)
        let facts = RetryPolicy.Facts(failure: failure, progress: (task.partial?.length ?? 0) - task.attempt.lengthAtStart,
                                      remainingAtStart: task.entry.size - task.attempt.lengthAtStart,
                                      failuresWithoutProgress: task.source.failuresWithoutProgress, attempts: task.attempt.count,
                                      jitter: Double.random(in: 0.5..<1.5), hostUnreachableFailures: hostFailures,
                                      preferredSource: task.currentSource.map { isPreferredOnly($0, of: task.entry) } ?? false)
        let decision = retryPolicy.decide(facts)
        task.source.failuresWithoutProgress = decision.failuresWithoutProgress
        switch decision.action {
        case .stop:
            return giveUp(task)
        case .nextSource(let markHost):
            if markHost, failure.isUnreachable, let source = task.currentSource,
               reachability.giveUp(on: source) {
                let why: String
                if case .unreachable(let message) = failure { why = message } else { why = "\(failure)" }
                report.warning("cannot reach \(hostKey(of: source)): \(why); its other files are left for a later run")
            }
            guard task.source.advance() else { return giveUp(task) }
            scheduler.enqueue(task)
        case .retry(let delay):
            releaseIfEmpty(task)
            scheduler.park(task, until: monotonicSeconds() + delay)
        }
    }

    /// A task that waits (back-off) or ends with no byte received gives its empty partial file
    /// back: thousands of entries waiting for a dead server must not hold thousands of open files
    /// (EMFILE) or leave empty files behind, nor a segmented one preallocated to the file's size.
    /// It is created again when bytes can arrive.
    func releaseIfEmpty(_ task: EntryTask) {
        guard let partial = task.partial, partial.length == 0, task.downloads.isEmpty else { return }
        partial.settle()
        partial.remove()
        task.partial = nil
    }

    func giveUp(_ task: EntryTask) {
        let why = task.history.last.map { "\($0)" } ?? "no source to fetch it from"
        let source = task.sources.last.map { " (last tried \(redactedURL($0)))" } ?? ""
        releaseIfEmpty(task)
        // Its writer may still hold a checkpoint for it: done before the descriptor goes.
        task.partial?.settle()
        task.partial?.close()
        task.attempt.delta.index = nil
        let unreachable = task.history.endedUnreachable
        if task.history.skippedUnreachable && unreachable {
            // Never asked: its host stopped answering earlier in this run (said once, when it was
            // marked). The entry is left for a later run, like one a deadline stopped.
            ending.notTried += 1
            task.move(to: .leftForLaterRun)
            summary.pending += 1
            releaseDuplicates(of: task.entry.path)
            return
        }
        // The source that gave the last failure: the current one, or the last once all were tried.
        let tried = task.currentSource ?? task.sources.last
        task.move(to: .failed)
        fail(task.entry, why + source, unreachable: unreachable,
             cause: task.history.last.map(FailureCause.init) ?? .other, source: tried)
    }



    /// A system error while handling `task` (``stopOrFail(_:_:)-entry``). While requests of it
    /// still run (a segmented file), they are stopped and the error is handled when the last is
    /// back (``handleSegment(_:of:)``): an entry ends once, with none of its requests running.
    func stopOrFail(_ task: EntryTask, _ error: Error) {
        if !task.downloads.isEmpty {
            segmentFailed(task, (error as? SystemError).map(TransferFailure.writeFailed)
                          ?? .network(code: 0, message: "\(error)", transient: true))
            return
        }
        let fatal = (error as? SystemError)?.isDestinationUnwritable == true
        task.move(to: fatal ? .leftForLaterRun : .failed)
        stopOrFail(task.entry, error)
    }

    /// A system error while handling `entry`: when the destination itself refuses writes (full,
    /// read-only, permissions) the whole run stops with exit 73; otherwise only the entry fails.
    func stopOrFail(_ entry: ManifestEntry, _ error: Error) {
        if let error = error as? SystemError, error.isDestinationUnwritable {
            ending.fatal = error
        } else {
            fail(entry, "\(error)", unreachable: false, cause: FailureCause(error))
        }
    }

    /// `cause` and `source` (the URL last tried, if the cause is a server's) are what
    /// `--summary` groups the failure by (``FailureGroups``).
    func fail(_ entry: ManifestEntry, _ failure: String, unreachable: Bool, cause: FailureCause, source: String? = nil) {
        releaseDuplicates(of: entry.path)
        // Masked once here for every place it goes: console, --json, the log and the journal.
        let message = redactingURLs(in: failure)
        summary.failed += 1
        reachability.noteEntryFailed(unreachable: unreachable)
        var result = EntryResult(path: entry.path, outcome: .failed(message), size: entry.size, source: nil)
        result.cause = cause
        result.host = source.map { redactedURL(hostKey(of: $0)) }
        summary.add(result)
        report.entryFinished(result)
        try? writer?.append(.failed(FailedRecord(identity: EntryIdentity(entry), error: message, time: Int64(currentUnixTime()))), durable: false)
    }
}
