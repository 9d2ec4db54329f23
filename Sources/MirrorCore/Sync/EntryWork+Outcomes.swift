import MirrorFS
import MirrorModel
import MirrorKit
import MirrorState

/// How an entry's attempt ends: a retry on the same source or the next one (``RetryPolicy``
/// decides), a checksum mismatch (``MismatchPolicy``), a republish (``ManifestWatch``), or the
/// entry given up; and which headers and credentials a request carries (``CacheRevalidation``,
/// ``SourceOrder``). docs/fleet.md describes the caches these serve.
extension EntryWork {
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
            emit(.queue(task))
        case .retry(let delay):
            releaseIfEmpty(task)
            emit(.wait(task, until: monotonicSeconds() + delay))
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
            task.move(to: .leftForLaterRun)
            emit(.notTried(path: task.entry.path))
            return
        }
        // The source that gave the last failure: the current one, or the last once all were tried.
        let tried = task.currentSource ?? task.sources.last
        fail(task, why + source, unreachable: unreachable, cause: task.history.last.map(FailureCause.init) ?? .other, source: tried)
    }

    /// The entry is given up with `message`; `cause` and `source` (the URL last tried, if the
    /// cause is a server's) are what `--summary` groups it by (``FailureGroups``).
    func fail(_ task: EntryTask, _ message: String, unreachable: Bool, cause: FailureCause, source: String? = nil) {
        task.move(to: .failed)
        reachability.noteEntryFailed(unreachable: unreachable)
        emit(.fail(EntryFailure(entry: task.entry, message: message, unreachable: unreachable, cause: cause, source: source)))
    }

    /// `task`'s verification or install failed with `error` (``Installer``).
    func failed(_ task: EntryTask, _ error: Error) -> [EntryEffect] { take { stopOrFail(task, error) } }

    /// A system error while handling `task`: when the destination itself refuses writes (full,
    /// read-only, permissions) the whole run stops with exit 73; otherwise only the entry fails.
    /// While requests of it still run (a segmented file), they are stopped and the error is
    /// handled when the last is back (``handleSegment(_:of:)``): an entry ends once, with none
    /// of its requests running.
    func stopOrFail(_ task: EntryTask, _ error: Error) {
        if !task.downloads.isEmpty {
            segmentFailed(task, (error as? SystemError).map(TransferFailure.writeFailed)
                          ?? .network(code: 0, message: "\(error)", transient: true))
            return
        }
        if let error = error as? SystemError, error.isDestinationUnwritable {
            task.move(to: .leftForLaterRun)
            emit(.stopRun(error))
        } else {
            fail(task, "\(error)", unreachable: false, cause: FailureCause(error))
        }
    }

    /// The verified digest of `task`'s bytes is not the manifest's (the loop's ``Installer``
    /// found it): the file is fetched again from zero (revalidating, or from the next source) or
    /// the entry fails; never is it installed.
    func checksumMismatch(_ task: EntryTask, partial: PartialFile, detail: String, got: String) -> [EntryEffect] {
        take { mismatch(task, partial: partial, detail: detail, got: got) }
    }

    private func mismatch(_ task: EntryTask, partial: PartialFile, detail: String, got: String) {
        if manifestChanged(under: task, partial: partial) { return }
        if repairDelta(task, partial: partial) { return }
        let entry = task.entry
        let validator = partial.validator
        partial.restartFromZero()
        let source = partial.sourceURL ?? task.currentSource ?? ""
        let revalidated = task.history.revalidating.contains(source)
        let sameAsBefore = task.history.wrongBytes(from: source, digest: got, detail: detail)
        let failures = task.history.checksumFailures
        let facts = MismatchPolicy.Facts(failures: failures, size: entry.size, revalidated: revalidated,
                                         sameAsBefore: sameAsBefore, otherSource: task.source.hasAnother)
        switch MismatchPolicy(attempts: options.checksumAttempts).decide(facts) {
        case .fail(let sameTwice):
            partial.settle()
            partial.remove()
            let attempts = failures == 1 ? "1 attempt" : "\(failures) attempts"
            let why = sameTwice
                ? "the server's file differs from the manifest (\(detail), the same twice from \(redactedURL(source))); "
                    + "republish the manifest or the file"
                : "checksum mismatch after \(attempts) (\(detail))"
            // The source's own file: remembered, so the next run asks whether it is still that
            // file before it downloads it again (``RefusedBook``).
            if sameTwice, !source.isEmpty, let validator {
                place.refused.record(RefusedSource(identity: EntryIdentity(entry), url: redactedURL(source), validator: validator,
                                                   got: got, at: Int64(currentUnixTime())))
            }
            fail(task, why, unreachable: false, cause: .checksumMismatch, source: source.isEmpty ? nil : source)
            return
        case .revalidate:
            task.history.revalidate(source)
            if let current = task.currentSource { task.history.revalidate(current) }
        case .nextSource:
            _ = task.source.advance(resetFailures: false)
        case .retry:
            break
        }
        task.attempt.fromZero = true
        emit(.queue(task))
    }

    /// The source answered 304 to the refused file's condition: it still holds the file an
    /// earlier run refused. The next source is tried, if any; else the entry fails at once, with
    /// nothing downloaded, until the server's file or the manifest changes (docs/cli.md, "A file
    /// the server holds wrong").
    func refusedAgain(_ task: EntryTask, _ download: Download) {
        let refused = place.refused.refusal(for: task.entry, url: download.url)
        if task.source.advance() {
            emit(.queue(task))
            return
        }
        task.partial?.remove()
        task.partial = nil
        let when = refused.map { " on \(Formatting.utcTimestamp($0.at))" } ?? ""
        let got = refused.map { ", it has sha256 \($0.got.prefix(16))…" } ?? ""
        fail(task, "the server's file differs from the manifest and was refused\(when)\(got); not downloaded again until the file "
             + "on the server (\(redactedURL(download.url))) or the manifest changes", unreachable: false, cause: .refusedBefore,
             source: download.url)
    }

    /// Whether the manifest was republished while `task` ran (``ManifestWatch``): then the server
    /// serves the new version, the bytes fetched are of no version this run knows, and the entry
    /// is left for the next run (pending; the run ends `incomplete`, exit 75), its partial file
    /// removed (its journal record names the old version, which the next run will not resume).
    func manifestChanged(under task: EntryTask, partial: PartialFile) -> Bool {
        guard let watch = manifestWatch, watch.hasChanged(now: monotonicSeconds(), deadline: stop.deadline) else { return false }
        partial.settle()
        partial.remove()
        task.move(to: .leftForLaterRun)
        emit(.pending)
        emit(.stopShort("the manifest changed during the run; the next run fetches its new version"))
        report.warning("\(task.entry.path): the manifest changed during the run (\(redactedURL(watch.location))); "
            + "the file is left for the next run")
        return true
    }
}
