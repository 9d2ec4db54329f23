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
            guard entry.size > 0, let digest = entry.digests[.sha256] ?? entry.digests[.sha512],
                  digest.bytes.count >= 16 else { return nil }
            size = entry.size
            high = digest.bytes[0 ..< 8].reduce(0) { $0 << 8 | UInt64($1) }
            low = digest.bytes[8 ..< 16].reduce(0) { $0 << 8 | UInt64($1) }
        }
    }

    /// Holds back every queued entry whose content an earlier queued entry will fetch.
    func holdDuplicates() {
        guard contentIndex != nil else { return }
        var first: [ContentKey: EntryTask] = [:]
        var leaderOf: [ObjectIdentifier: PathKey] = [:]
        for task in scheduler.ready where task.resume == nil && task.resumeOffset == 0 {
            guard let key = ContentKey(task.entry) else { continue }
            if let leader = first[key] {
                // The copy is found by the whole digest set (``ContentIndex``): only the same set waits.
                if leader.entry.digests == task.entry.digests { leaderOf[ObjectIdentifier(task)] = PathKey(leader.entry.path) }
            } else {
                first[key] = task
            }
        }
        guard !leaderOf.isEmpty else { return }
        for task in scheduler.withdraw(where: { leaderOf[ObjectIdentifier($0)] != nil }) {
            if let leader = leaderOf[ObjectIdentifier(task)] { waitingForContent[leader, default: []].append(task) }
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
