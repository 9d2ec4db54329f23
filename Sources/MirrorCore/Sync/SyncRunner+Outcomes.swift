import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// The loop's side of an entry's work (``EntryWork``): what it asks (``EntryEffect``) carried out
/// on the queues, the install batch, the summary and the run's ending, and a failure recorded
/// for the summary, the journal and `mirror status`.
extension SyncRunner {
    /// Carries out `effects` in the order the work asked for them.
    func apply(_ effects: [EntryEffect]) {
        for effect in effects {
            switch effect {
            case .queue(let task):
                scheduler.enqueue(task)
            case .wait(let task, let until):
                scheduler.park(task, until: until)
            case .submit(let download, let task):
                scheduler.started(download, for: task)
                threads?.submit(download, for: task)
            case .install(let task):
                verifyAndInstall(task)
            case .fail(let failure):
                fail(failure.entry, failure.message, unreachable: failure.unreachable, cause: failure.cause, source: failure.source)
            case .pending:
                summary.pending += 1
            case .stopShort(let reason):
                ending.keepFirstStop(reason)
            case .stopRun(let error):
                ending.fatal = error
            case .notTried(let path):
                ending.notTried += 1
                summary.pending += 1
                releaseDuplicates(of: path)
            case .resumed(let kept, let rehashed):
                summary.resumedFiles += 1
                summary.resumedBytes += kept
                summary.rehashedBytes += rehashed
            case .rangeIgnored(let source, let path, let dropped):
                let host = redactedURL(hostKey(of: source))
                if rangeIgnoredHosts.insert(host).inserted {
                    report.warning("\(host) ignores range requests (it answered a resume with the whole file): files from it are "
                                   + "fetched again from their first byte (\(path): \(Formatting.bytes(dropped)) already here)")
                }
            }
        }
    }

    /// Starts the next attempt of `task` (``EntryWork/start(_:)``).
    func start(_ task: EntryTask) {
        guard let work else { return }
        apply(work.start(task))
    }

    /// The requests that ended, each to its entry's work (``EntryWork/finished(_:of:)``).
    func handle(_ finished: [Download]) {
        guard let work else { return }
        for download in finished {
            // Not finished: a resume answered with the whole file, paused until its file is cut.
            if download.offersWholeFile {
                if let task = scheduler.task(of: download) { apply(work.wholeFileOffered(download, of: task)) }
                continue
            }
            guard let task = scheduler.ended(download) else { continue }
            threads?.ended(download)
            apply(work.finished(download, of: task))
        }
    }

    /// Widens the segmented files whose hash waited for bytes while their transfer thread waited
    /// for the network (``EntryWork/widen(_:now:)``), one file at a time.
    ///
    /// - Returns: seconds until the next decision is due, or nil when no file can widen.
    func widenSegments(_ now: Double) -> Double? {
        guard let work, options.segments > 1, !scheduler.stop.isEnding else { return nil }
        var nextDue: Double?
        var seen = Set<ObjectIdentifier>()
        for task in scheduler.activeTasks where seen.insert(ObjectIdentifier(task)).inserted && work.mayWiden(task) {
            let (due, effects) = work.widen(task, now: now)
            apply(effects)
            if let due { nextDue = min(nextDue ?? .infinity, due) }
        }
        return nextDue.map { max(0.001, $0) }
    }

    /// A system error while handling `entry` (a present file checked, an install): when the
    /// destination itself refuses writes (full, read-only, permissions) the whole run stops with
    /// exit 73; otherwise only the entry fails.
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
        if cause == .refusedBefore { summary.refused += 1 }
        if unreachable { summary.notReached += 1 }
        var result = EntryResult(path: entry.path, outcome: .failed(message), size: entry.size, source: nil)
        result.cause = cause
        result.host = source.map { redactedURL(hostKey(of: $0)) }
        summary.add(result)
        report.entryFinished(result)
        try? writer?.append(.failed(FailedRecord(identity: EntryIdentity(entry), error: message, time: Int64(currentUnixTime()))), durable: false)
    }
}
