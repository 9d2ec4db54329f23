import Dispatch

/// The whole plan of a run, from the manifest, the destination and the journal, before any
/// request: what to do for every entry (``Planner``), and which files an earlier run installed
/// that the manifest no longer lists, which is what deleting (`--delete`) starts from.
///
/// The walk is apart from the decisions (as rclone's `fs/march` is apart from `fs/sync`): the
/// ``Planner`` decides one entry from one `stat` and one journal line; this type goes over the set.
public struct Reconciler {
    public let planner: Planner
    public let journal: Journal?

    public init(planner: Planner, journal: Journal?) {
        self.planner = planner
        self.journal = journal
    }

    /// One item per manifest entry, in manifest order. A path that cannot even be inspected (a
    /// permission error on a folder, a file where a folder should be) blocks that entry, not the
    /// whole run.
    public func plan(_ manifest: Manifest) -> [PlanItem] {
        manifest.entries.map { PlanItem(entry: $0, action: action(for: $0)) }
    }

    /// ``action(for:)`` of every entry, handed to `body` in manifest order on the calling thread,
    /// with the decisions (a `stat` and a journal lookup each) made by this thread and a second
    /// one, a window of entries at a time. Why: with 10^6 entries the `stat`s are a second of
    /// system time, spent waiting on nothing but the CPU; two cores halve it. Each thread asks
    /// through its own ``Destination`` (``Destination/sibling()``), so each keeps its folder
    /// open; the journal's lookups are read-only and serialised by its lock.
    /// `window`: entries decided between two hand-overs (tests make it small).
    public func forEachAction(in entries: [ManifestEntry], window: Int = 8192,
                              _ body: (ManifestEntry, PlannedAction) throws -> Void) rethrows {
        try forEachAction(in: entries, window: window, known: nil, body)
    }

    /// The same; `known`: entries already found up to date while the manifest was read
    /// (``PlanLookAhead``), not asked again.
    func forEachAction(in entries: [ManifestEntry], window: Int = 8192, known: PlanLookAhead.Decided?,
                       _ body: (ManifestEntry, PlannedAction) throws -> Void) rethrows {
        // Entries are lent from the array's storage (`UnsafeBufferPointer`'s subscript is an
        // address), not copied out of it: a copy retains and releases each of an entry's
        // references, for every entry of a no-op run.
        try entries.withUnsafeBufferPointer { entries in
            try forEachAction(in: entries, window: window, known: known, body)
        }
    }

    private func forEachAction(in entries: UnsafeBufferPointer<ManifestEntry>, window: Int, known: PlanLookAhead.Decided?,
                               _ body: (ManifestEntry, PlannedAction) throws -> Void) rethrows {
        func action(at i: Int, by reconciler: Reconciler) -> PlannedAction {
            known?.isUpToDate(i) == true ? .upToDate : reconciler.action(for: entries[i])
        }
        guard window > 1, entries.count > window, WorkerPool.coreCount > 1 else {
            for i in entries.indices { try body(entries[i], action(at: i, by: self)) }
            return
        }
        let helper = Reconciler(planner: Planner(destination: planner.destination?.sibling(), journal: planner.journal,
                                                 partialFolder: planner.partialFolder), journal: journal)
        var actions = [PlannedAction](repeating: .upToDate, count: window)
        let run = max(1, min(Reconciler.stride, window / 4))  // small windows (tests) still alternate
        var start = entries.startIndex
        while start < entries.endIndex {
            let end = min(start + window, entries.endIndex)
            actions.withUnsafeMutableBufferPointer { out in
                // The threads take alternate runs of entries (``stride``), so each gets
                // about as many of the entries the look-ahead already decided (a skip) as of the
                // others (a `stat`): those come in the look-ahead's batches, and with a half of
                // the window each, one thread could get a decided batch and wait for the other
                // (10^6 entries: the last 0.3 s of a dry run on one core of two). Runs, not
                // single entries, so that the two seldom write one cache line of `out` at once.
                let base = out.baseAddress
                DispatchQueue.concurrentPerform(iterations: 2) { part in
                    let planner = part == 0 ? self : helper
                    var from = start + part * run
                    while from < end {
                        for i in from ..< min(from + run, end) { base?[i - start] = action(at: i, by: planner) }
                        from += 2 * run
                    }
                }
            }
            for i in start ..< end { try body(entries[i], actions[i - start]) }
            start = end
        }
    }

    /// Entries a planning thread decides in a row (``forEachAction(in:window:known:_:)``).
    static let stride = 64

    public func action(for entry: ManifestEntry) -> PlannedAction {
        do {
            return try planner.action(for: entry)
        } catch {
            return .blocked("\(error)")
        }
    }

    /// The journal's verified records whose paths the manifest does not list (compared as bytes),
    /// sorted by path bytes. Decodes only those records: asked for only when deleting.
    public func unlisted(by manifest: Manifest) -> [VerifiedRecord] {
        unlisted(listed: PathIndex(listing: manifest.entries))
    }

    /// The same, for `listed`, the manifest's paths (``PathIndex/init(listing:)``) the caller already has.
    func unlisted(listed: PathIndex) -> [VerifiedRecord] {
        guard let journal else { return [] }
        return journal.verifiedRecords { !listed.containsFile($0.path) }
            .sorted { PathKey($0.identity.path) < PathKey($1.identity.path) }
    }
}
