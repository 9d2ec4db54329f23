import MirrorKit
import MirrorModel

/// The runner's side of caches and preferred sources: which headers and credentials one request
/// carries (``CacheRevalidation``, ``SourceOrder``), and what a checksum mismatch leads to
/// (``MismatchPolicy``). docs/fleet.md describes the site cache these serve.
extension SyncRunner {
    /// The settings of one request of `task` at `url`: it asks caches to revalidate once that URL
    /// gave wrong bytes; a `--prefer` URL does not get the `--auth-header-env` header, which is
    /// meant for the manifest's sources; and netrc credentials go only to the origins of
    /// `manifestSources` (the entry's own URLs unless given: a chunk index has its own) and of the
    /// manifest URL (``CredentialScope``).
    func transferSettings(for task: EntryTask, url: String, manifestSources: [String]? = nil) -> TransferSettings {
        options.transferSettings(url: url, revalidate: task.history.revalidating.contains(url),
                                 manifestSources: manifestSources ?? manifest.sources(for: task.entry))
    }

    /// Whether `url` is one of `entry`'s `--prefer` URLs and none of the manifest's own: a source
    /// that is passed over at once when it refuses, throttles or stalls (``RetryPolicy``).
    func isPreferredOnly(_ url: String, of entry: ManifestEntry) -> Bool {
        options.sourceOrder.isPreferred(url) && !manifest.sources(for: entry).contains(url)
    }

    /// The verified digest of `task`'s bytes is not the manifest's: the file is fetched again from
    /// zero (revalidating, or from the next source) or the entry fails; never is it installed.
    func checksumMismatch(_ task: EntryTask, partial: PartialFile, detail: String, got: String) {
        if manifestChanged(under: task, partial: partial) { return }
        if repairDelta(task, partial: partial) { return }
        let entry = task.entry
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
            task.move(to: .failed)
            let attempts = failures == 1 ? "1 attempt" : "\(failures) attempts"
            let why = sameTwice
                ? "the server's file differs from the manifest (\(detail), the same twice from \(redactedURL(source))); "
                    + "republish the manifest or the file"
                : "checksum mismatch after \(attempts) (\(detail))"
            fail(entry, why, unreachable: false, cause: .checksumMismatch, source: source.isEmpty ? nil : source)
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
        scheduler.enqueue(task)
    }

    /// Whether the manifest was republished while `task` ran (``ManifestWatch``): then the server
    /// serves the new version, the bytes fetched are of no version this run knows, and the entry
    /// is left for the next run (pending; the run ends `incomplete`, exit 75), its partial file
    /// removed (its journal record names the old version, which the next run will not resume).
    func manifestChanged(under task: EntryTask, partial: PartialFile) -> Bool {
        guard let watch = manifestWatch, watch.hasChanged(now: monotonicSeconds(), deadline: scheduler.stop.deadline) else { return false }
        partial.settle()
        partial.remove()
        task.move(to: .leftForLaterRun)
        summary.pending += 1
        ending.keepFirstStop("the manifest changed during the run; the next run fetches its new version")
        report.warning("\(task.entry.path): the manifest changed during the run (\(redactedURL(watch.location))); "
            + "the file is left for the next run")
        return true
    }
}
