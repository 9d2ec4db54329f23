/// The runner's side of caches and preferred sources: which headers and credentials one request
/// carries (``CacheRevalidation``, ``SourceOrder``), and what a checksum mismatch leads to
/// (``MismatchPolicy``). docs/fleet.md describes the site cache these serve.
extension SyncRunner {
    /// The settings of one request of `task` at `url`: it asks caches to revalidate once that URL
    /// gave wrong bytes, and a `--prefer` URL does not get the `--auth-header-env` header, which
    /// is meant for the manifest's sources (netrc credentials still go by host).
    func transferSettings(for task: EntryTask, url: String) -> TransferSettings {
        var settings = options.transfer
        settings.revalidate = task.revalidating.contains(url)
        if options.sourceOrder.isPreferred(url) && !manifest.sources(for: task.entry).contains(url) {
            settings.security.authorization = nil
        }
        return settings
    }

    /// The verified digest of `task`'s bytes is not the manifest's: the file is fetched again from
    /// zero (revalidating, or from the next source) or the entry fails; never is it installed.
    func checksumMismatch(_ task: EntryTask, partial: PartialFile, detail: String, got: String) {
        let entry = task.entry
        task.checksumFailures += 1
        task.onlyUnreachable = false
        partial.restartFromZero()
        let source = partial.sourceURL ?? task.currentSource ?? ""
        let facts = MismatchPolicy.Facts(failures: task.checksumFailures, size: entry.size,
                                         revalidated: task.revalidating.contains(source),
                                         sameAsBefore: task.wrongDigests[source] == got,
                                         otherSource: task.sources.indices.contains(task.sourceIndex + 1))
        task.wrongDigests[source] = got
        switch MismatchPolicy(attempts: options.checksumAttempts).decide(facts) {
        case .fail(let sameTwice):
            partial.settle()
            partial.remove()
            let attempts = task.checksumFailures == 1 ? "1 attempt" : "\(task.checksumFailures) attempts"
            let why = sameTwice
                ? "the server's file differs from the manifest (\(detail), the same twice from \(redactedURL(source))); "
                    + "republish the manifest or the file"
                : "checksum mismatch after \(attempts) (\(detail))"
            fail(entry, why, unreachable: false)
            return
        case .revalidate:
            task.revalidating.insert(source)
            if let current = task.currentSource { task.revalidating.insert(current) }
        case .nextSource:
            task.sourceIndex += 1
        case .retry:
            break
        }
        task.lastFailure = .checksumMismatch(detail)
        task.fromZero = true
        ready.append(task)
    }
}
