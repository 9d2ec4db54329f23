import MirrorModel
import MirrorState

/// One content at several new paths in one run (docs/cli.md, "Reuse by content"): fetched once.
///
/// After planning, the entries to download from zero are grouped by content (size and digest).
/// The first of each group is downloaded; the others wait, out of the queue, until it is
/// installed, and then start like any entry: ``copyLocally(_:)`` finds the new file through the
/// ``ContentIndex`` and copies it (verified like a download). If the first one fails or gives
/// up, the others start anyway and try their own sources. A run that stops first counts them as
/// not finished (pending), like any entry it never started.
extension SyncRunner {
    /// Holds back every queued entry whose content an earlier queued entry will fetch.
    /// Called after planning, before anything starts: the plan's entries are all in
    /// ``PlannedEntries`` then, and the tasks of those that wait are made here.
    ///
    /// Three passes, so that memory stays at 16 bytes an entry to fetch: each entry's content as
    /// 64 bits and its place in plan order, sorted, finds the places that share a key; only the
    /// entries at those places are then compared exactly. A dictionary of the entries by content
    /// held a copy of every entry to fetch (50 MB at its peak for 100,000 new files, `heaptrack`).
    func holdDuplicates() {
        guard contentIndex != nil, let planned = scheduler.planned else { return }
        var keys: [(key: UInt64, place: Int32)] = []
        var place: Int32 = 0
        planned.forEach { entry, task in
            defer { place += 1 }
            guard task?.resume == nil, (task?.resumeOffset ?? 0) == 0, let key = ContentKey(entry) else { return }
            keys.append((key.short, place))
        }
        keys.sort { $0.key != $1.key ? $0.key < $1.key : $0.place < $1.place }
        var shared = Set<Int32>()
        var start = 0
        while start < keys.count {
            var end = start + 1
            while end < keys.count && keys[end].key == keys[start].key { end += 1 }
            if end - start > 1 { for k in start ..< end { shared.insert(keys[k].place) } }
            start = end
        }
        keys = []
        guard !shared.isEmpty else { return }
        // The first entry with a content leads; a later one waits for it if it has the same
        // digests (``ContentIndex`` finds the copy by the whole digest set).
        var first: [ContentKey: ManifestEntry] = [:]
        var leaderOf: [ManifestPath: ManifestPath] = [:]
        place = 0
        planned.forEach { entry, _ in
            defer { place += 1 }
            guard shared.contains(place), let key = ContentKey(entry) else { return }
            if let leader = first[key] {
                if leader.digests == entry.digests { leaderOf[entry.pathBytes] = leader.pathBytes }
            } else {
                first[key] = entry
            }
        }
        guard !leaderOf.isEmpty else { return }
        for task in planned.withdraw(where: { entry, _ in leaderOf[entry.pathBytes] != nil }) {
            if let leader = leaderOf[task.entry.pathBytes] { tasks.hold(task, behind: leader.string) }
        }
    }

    /// The entry at `path` ended (installed, failed, given up): the entries that waited for its
    /// content start now.
    func releaseDuplicates(of path: String) {
        for task in tasks.release(behind: path) { scheduler.enqueue(task) }
    }

    /// Starts every waiting entry (nothing else would start them: their content's entry ended
    /// without a word, which should not happen).
    func releaseAllDuplicates() {
        for task in tasks.releaseAll() { scheduler.enqueue(task) }
    }
}
