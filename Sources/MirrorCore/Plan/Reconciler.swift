import Dispatch
import MirrorKit
import MirrorModel
import MirrorState

/// The whole plan of a run, from the manifest, the destination and the journal, before any
/// request: what to do for every entry (``Planner``), and which files an earlier run installed
/// that the manifest no longer lists, which is what deleting (`--delete`) starts from.
///
/// The walk is apart from the decisions (as rclone's `fs/march` is apart from `fs/sync`): the
/// ``Planner`` decides one entry from one `stat` and one journal line; this type goes over the set.
public struct Reconciler: Sendable {
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

    /// ``action(for:)`` of every entry, handed to `body` in manifest order on the calling thread.
    /// The decisions (a `stat` and a journal lookup each) are made a window of entries at a time by
    /// ``threads`` threads, while the calling thread hands the previous window's decisions to
    /// `body`. Why: with 10^6 entries the `stat`s are more than a second of system time, spent
    /// waiting on nothing but the CPU, and each core takes its share. Each thread asks through its
    /// own ``Destination`` (``Destination/sibling()``), so each keeps its folder open; the
    /// journal's lookups are read-only and take its lock for reading (``ReadWriteLock``).
    /// `window`: entries decided between two hand-overs (tests make it small).
    public func forEachAction(in entries: [ManifestEntry], window: Int = 8192,
                              _ body: (ManifestEntry, PlannedAction) throws -> Void) rethrows {
        try forEachAction(in: entries, window: window, known: nil, body)
    }

    /// The same; `known`: entries already found up to date while the manifest was read
    /// (``PlanLookAhead``), not asked again. `threads`: how many plan (tests choose).
    func forEachAction(in entries: [ManifestEntry], window: Int = 8192, threads: Int = Reconciler.threads,
                       known: PlanLookAhead.Decided?, _ body: (ManifestEntry, PlannedAction) throws -> Void) rethrows {
        // Entries are lent from the array's storage (`UnsafeBufferPointer`'s subscript is an
        // address), not copied out of it: a copy retains and releases each of an entry's
        // references, for every entry of a no-op run.
        try entries.withUnsafeBufferPointer { entries in
            try forEachAction(in: entries, window: window, threads: threads, known: known, body)
        }
    }

    private func forEachAction(in entries: UnsafeBufferPointer<ManifestEntry>, window: Int, threads: Int,
                               known: PlanLookAhead.Decided?,
                               _ body: (ManifestEntry, PlannedAction) throws -> Void) rethrows {
        guard window > 1, entries.count > window, threads > 1 else {
            for i in entries.indices { try body(entries[i], decision(at: i, in: entries, known: known)) }
            return
        }
        let planners = (0 ..< threads).map { _ in
            Reconciler(planner: Planner(destination: planner.destination?.sibling(), journal: planner.journal,
                                        partialFolder: planner.partialFolder), journal: journal)
        }
        // The threads take alternate runs of entries (``stride``), so each gets about as many of
        // the entries the look-ahead already decided (a skip) as of the others (a `stat`): those
        // come in the look-ahead's batches, and with a share of the window each, one thread could
        // get a decided batch and wait for the others (10^6 entries, two threads: the last 0.3 s of
        // a dry run on one core of two). Runs, not single entries, so that two threads seldom
        // write one cache line of the decisions at once. Small windows (tests) still alternate.
        let run = max(1, min(Reconciler.stride, window / (2 * threads)))
        // Two windows of decisions: the threads fill one while `body` is handed the other.
        var current = UnsafeMutableBufferPointer<PlannedAction>.allocate(capacity: window)
        var next = UnsafeMutableBufferPointer<PlannedAction>.allocate(capacity: window)
        current.initialize(repeating: .upToDate)
        next.initialize(repeating: .upToDate)
        let planning = DispatchGroup()
        defer {
            // No thread touches the entries or the decisions once this returns, `body` thrown or not.
            planning.wait()
            for buffer in [current, next] {
                buffer.deinitialize()
                buffer.deallocate()
            }
        }
        func decide(from start: Int, into out: UnsafeMutableBufferPointer<PlannedAction>) {
            let end = min(start + window, entries.endIndex)
            // Lent to the threads: `planning.wait()` comes before the buffers go (the `defer` above),
            // and each thread writes only its own runs of `out`.
            nonisolated(unsafe) let (entries, out) = (entries, out)
            for (part, reconciler) in planners.enumerated() {
                DispatchQueue.global().async(group: planning) {
                    var from = start + part * run
                    while from < end {
                        for i in from ..< min(from + run, end) {
                            out[i - start] = reconciler.decision(at: i, in: entries, known: known)
                        }
                        from += threads * run
                    }
                }
            }
        }
        var start = entries.startIndex
        decide(from: start, into: current)
        planning.wait()
        while start < entries.endIndex {
            let end = min(start + window, entries.endIndex)
            if end < entries.endIndex { decide(from: end, into: next) }
            for i in start ..< end { try body(entries[i], current[i - start]) }
            planning.wait()
            swap(&current, &next)
            start = end
        }
    }

    /// Entry `i`'s action, by this reconciler's planner unless the look-ahead already found it up to date.
    private func decision(at i: Int, in entries: UnsafeBufferPointer<ManifestEntry>, known: PlanLookAhead.Decided?) -> PlannedAction {
        known?.isUpToDate(i) == true ? .upToDate : action(for: entries[i])
    }

    /// Entries a planning thread decides in a row (``forEachAction(in:window:threads:known:_:)``).
    static let stride = 64

    /// Threads that plan: one per core this process may use (``WorkerPool/coreCount``), at most 8.
    /// Why a cap: every thread holds a folder open and reads the journal under its lock, and the
    /// calling thread hands the decisions on alone, one window per turn of all of them; more
    /// threads than that were never measured to gain (docs/performance.md, "Planning threads").
    static let threads = min(WorkerPool.coreCount, 8)

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
