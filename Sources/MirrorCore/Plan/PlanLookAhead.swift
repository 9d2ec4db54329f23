import MirrorKit
import MirrorModel

/// A sync starts planning while the manifest is still being read: a thread of its own takes the
/// entries the reader has checked so far and marks those that are up to date, one bit each
/// (docs/performance.md, "The dry run plans while the manifest is read").
///
/// Why: at 10^6 entries reading the manifest keeps one core busy for about a second, and the plan
/// (a `stat` and a journal lookup per entry, ``Planner/isUpToDate(_:)``) needs about 1.7 core
/// seconds more. DEST's journal is read meanwhile (`--dry-run`: ``ReadOnlyDestination``; a run:
/// ``EarlyPlace``, under DEST's lock), so from the moment it is there the second core can plan the
/// entries read so far instead of waiting for the last one. Nothing is printed before the whole
/// manifest is valid: an entry marked here is only not planned again in its turn
/// (``Reconciler/forEachAction(in:window:threads:known:_:)``).
///
/// What it decides is the "up to date" of ``Planner/action(for:)`` and nothing else: a bit is
/// set only when the file's `stat` is the one the journal verified, which is what the plan would
/// find a moment later; every other entry is planned in its turn as before. Memory stays bounded:
/// at most ``maxWaiting`` batches of copies wait for the thread; a batch that finds the queue full
/// (the journal is still being read, or the thread is behind) is not handed over, and its entries
/// are planned in their turn. When entries stop coming in order (a manifest read again from the
/// start by libyaml, ``FastManifestScanner/InputReleased``), none more is handed over.
///
/// Sendable, unchecked: shared by the reader's thread and its own (`mirror-plan`). `waiting`,
/// `stopping`, `finished`, `working`, `planning` and `idle` are read and written only with
/// `state` locked; `batch`, `handedOver` and `closed` only by the reader's thread (``offer(_:_:)``,
/// ``finish()``); `decided` only by its thread until that sets `finished` under `state`, and
/// after that only by ``finish()``, which saw `finished` under `state`. A lock-guarded box for the
/// reader's side would put a lock on every entry the reader offers.
final class PlanLookAhead: @unchecked Sendable {
    /// Entries per hand-over (tests make it small).
    let batchSize: Int
    /// Batches waiting at most: 8 × 4096 copies of entries, a few MB at 10^6 entries.
    static let maxWaiting = 8

    /// The entries found up to date, by index; an entry not marked was not decided.
    struct Decided {
        fileprivate var bits: [UInt64] = []

        func isUpToDate(_ index: Int) -> Bool {
            index >= 0 && index >> 6 < bits.count && bits[index >> 6] & (1 << UInt64(index & 63)) != 0
        }

        fileprivate mutating func mark(_ index: Int) {
            if index >> 6 >= bits.count { bits.append(contentsOf: repeatElement(0, count: index >> 6 + 1 - bits.count)) }
            bits[index >> 6] |= 1 << UInt64(index & 63)
        }
    }

    private let state = Condition()
    // Guarded by `state`.
    private var waiting: [(start: Int, entries: [ManifestEntry])] = []
    private var stopping = false
    private var finished = false
    /// The thread is deciding a batch it took.
    private var working = false
    /// The thread has DEST and its journal and plans; before that, ``finish()`` does not wait
    /// for it (an invalid manifest is reported without waiting for DEST's journal to be read).
    private var planning = false
    /// The thread has no use for entries (no DEST or no journal yet: nothing can be up to date).
    private var idle = false
    // The reader's side only (one thread: the one that reads the manifest).
    private var batch: [ManifestEntry] = []
    private var handedOver = 0
    private var closed = false
    // The thread's side until `finished`, then the caller's.
    private var decided = Decided()

    /// Starts the thread; it waits for `disk` (DEST and its journal, read meanwhile).
    convenience init(disk: Background<Result<ReadOnlyDestination, Error>>, batchSize: Int = 4096) {
        self.init(batchSize: batchSize) {
            guard case .success(let opened) = disk.value(), let destination = opened.destination, let journal = opened.journal else {
                return nil
            }
            return Planner(destination: destination.sibling(), journal: journal, partialFolder: opened.partials)
        }
    }

    /// Starts the thread; it asks `planner` (which waits for DEST's journal) for what it plans
    /// with, and takes no entry when that is nil (nothing can be found up to date).
    init(batchSize: Int = 4096, planner: @escaping @Sendable () -> Planner?) {
        self.batchSize = max(1, batchSize)
        SystemThread.start(name: "mirror-plan", stackSize: 1 << 20) { [self] in run(planner) }
    }

    /// The reader's side: the manifest's entry at `index` has passed every rule so far.
    func offer(_ index: Int, _ entry: ManifestEntry) {
        guard !closed else { return }
        guard index == handedOver + batch.count else {
            closed = true
            return
        }
        batch.append(entry)
        guard batch.count == batchSize else { return }
        state.lock()
        if idle || stopping {
            closed = true
        } else if waiting.count < PlanLookAhead.maxWaiting {
            waiting.append((handedOver, batch))
            state.signal()
        }
        state.unlock()
        handedOver += batch.count
        batch = []
    }

    /// Waits until the thread has decided every batch handed over (tests).
    func settle() {
        state.lock()
        while !waiting.isEmpty || working { state.wait() }
        state.unlock()
    }

    /// Stops the thread after the entries it is planning now and returns what it decided. Called
    /// once the manifest is read; later calls return the same.
    func finish() -> Decided {
        closed = true
        batch = []
        state.lock()
        defer { state.unlock() }
        stopping = true
        state.broadcast()
        guard planning else { return Decided() }
        while !finished { state.wait() }
        return decided
    }

    private func run(_ makePlanner: () -> Planner?) {
        defer {
            state.lock()
            finished = true
            waiting = []
            state.broadcast()
            state.unlock()
        }
        guard let planner = makePlanner() else {
            state.lock()
            idle = true
            state.unlock()
            return
        }
        state.lock()
        planning = !stopping
        state.unlock()
        guard planning else { return }
        while true {
            state.lock()
            working = false
            state.broadcast()
            while waiting.isEmpty && !stopping { state.wait() }
            if stopping {
                state.unlock()
                return
            }
            let next = waiting.removeFirst()
            working = true
            state.unlock()
            for (offset, entry) in next.entries.enumerated() where planner.isUpToDate(entry) {
                decided.mark(next.start + offset)
            }
        }
    }
}