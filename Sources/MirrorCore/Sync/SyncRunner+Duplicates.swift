/// One content at several new paths in one run (docs/cli.md, "Reuse by content"): fetched once.
///
/// After planning, the entries to download from zero are grouped by content (size and digest).
/// The first of each group is downloaded; the others wait, out of the queue, until it is
/// installed, and then start like any entry: ``copyLocally(_:)`` finds the new file through the
/// ``ContentIndex`` and copies it (verified like a download). If the first one fails or gives
/// up, the others start anyway and try their own sources. A run that stops first counts them as
/// not finished (pending), like any entry it never started.
extension SyncRunner {
    /// Content, for grouping: the size and the first 128 bits of a digest. Two different files
    /// that agree on these only cost a copy that then fails its check and is downloaded.
    struct ContentKey: Hashable {
        var size: Int64
        var high: UInt64
        var low: UInt64

        init?(_ entry: ManifestEntry) {
            guard entry.size > 0, let digest = entry.digests[.sha256] ?? entry.digests[.sha512] else { return nil }
            guard let (high, low) = digest.withUnsafeBytes({ bytes -> (UInt64, UInt64)? in
                guard bytes.count >= 16 else { return nil }
                return (bytes[0 ..< 8].reduce(0) { $0 << 8 | UInt64($1) }, bytes[8 ..< 16].reduce(0) { $0 << 8 | UInt64($1) })
            }) else { return nil }
            (size, self.high, self.low) = (entry.size, high, low)
        }
    }

    /// Holds back every queued entry whose content an earlier queued entry will fetch.
    /// Called after planning, before anything starts: the plan's entries are all in
    /// ``PlannedEntries`` then, and the tasks of those that wait are made here.
    func holdDuplicates() {
        guard contentIndex != nil, let planned = scheduler.planned else { return }
        var first: [ContentKey: ManifestEntry] = [:]
        // Followers by path bytes (a valid manifest lists each path once).
        var leaderOf: [PathKey: PathKey] = [:]
        planned.forEach { entry, task in
            guard task?.resume == nil, (task?.resumeOffset ?? 0) == 0, let key = ContentKey(entry) else { return }
            if let leader = first[key] {
                // The copy is found by the whole digest set (``ContentIndex``): only the same set waits.
                if leader.digests == entry.digests { leaderOf[PathKey(entry.path)] = PathKey(leader.path) }
            } else {
                first[key] = entry
            }
        }
        guard !leaderOf.isEmpty else { return }
        for task in planned.withdraw(where: { entry, _ in leaderOf[PathKey(entry.path)] != nil }) {
            if let leader = leaderOf[PathKey(task.entry.path)] { waitingForContent[leader, default: []].append(task) }
        }
    }

    /// The entry at `path` ended (installed, failed, given up): the entries that waited for its
    /// content start now.
    func releaseDuplicates(of path: String) {
        guard !waitingForContent.isEmpty, let waiting = waitingForContent.removeValue(forKey: PathKey(path)) else { return }
        for task in waiting { scheduler.enqueue(task) }
    }

    /// Starts every waiting entry (nothing else would start them: their content's entry ended
    /// without a word, which should not happen).
    func releaseAllDuplicates() {
        for key in Array(waitingForContent.keys) {
            for task in waitingForContent.removeValue(forKey: key) ?? [] { scheduler.enqueue(task) }
        }
    }

    /// Entries still waiting for content when the run ends (it stopped first): not finished.
    var heldDuplicates: Int { waitingForContent.values.reduce(0) { $0 + $1.count } }
}
