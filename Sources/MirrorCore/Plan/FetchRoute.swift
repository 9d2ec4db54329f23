import MirrorModel

/// How the bytes of an entry that the plan fetches from zero (``PlannedAction/download(replacing:)``)
/// would reach DEST, as the run decides when the entry starts (``EntryWork/start(_:)``): a copy
/// of a file on this machine (docs/cli.md, "Reuse by content"), else a chunk delta ("Chunk
/// deltas"), else the whole file. What the dry run prints and counts (docs/cli.md, `--dry-run`).
enum FetchRoute: Equatable {
    /// Copied from `from`, a file on this machine (or the one another entry of the run fetches
    /// first): nothing is fetched.
    case copy(from: String)
    /// A chunk delta from the older copy `from`; `atItsPath`: that copy is the file at the
    /// entry's path in DEST. `fetched`: its ranges and its chunk index.
    case delta(from: String, atItsPath: Bool, fetched: Int64)
    /// The whole file, and a chunk index fetched on the way; `noDelta`: why a delta that was
    /// tried is not used (nil when none was tried).
    case whole(fetched: Int64, noDelta: String?)

    /// Bytes the run would receive from the network for the entry.
    var fetchedBytes: Int64 {
        switch self {
        case .copy: return 0
        case .delta(_, _, let fetched), .whole(let fetched, _): return fetched
        }
    }
}

/// Decides ``FetchRoute`` for the dry run with the code the run uses at each step: the
/// ``ContentIndex`` that ``EntryWork/copyLocally(_:)`` asks, the grouping of one content at
/// several paths of ``SyncRunner/holdDuplicates()`` (``ContentLeaders``), and the delta's
/// ``DeltaPreparation``. Not a second copy of the decisions: a plan that says what the run will not
/// do is worse than none (a dry run that counted a renamed 64 GiB image as a download).
final class FetchRouter {
    private let entries: [ManifestEntry]
    private let contentIndex: ContentIndex?
    private let delta: DeltaPreparation
    /// The URL an entry's first attempt asks (``SourceOrder``: `--prefer` bases first).
    private let firstSource: (ManifestEntry) -> String?
    /// How a path under DEST is shown (``Destination/display(_:)``).
    private let display: (String) -> String
    private var leaders = ContentLeaders()

    init(entries: [ManifestEntry], contentIndex: ContentIndex?, delta: DeltaPreparation,
         firstSource: @escaping (ManifestEntry) -> String?, display: @escaping (String) -> String) {
        self.entries = entries
        self.contentIndex = contentIndex
        self.delta = delta
        self.firstSource = firstSource
        self.display = display
    }

    /// The route of `entries[index]`, planned to be fetched from zero. Asked in manifest order,
    /// once per such entry (an earlier one with the same content leads).
    func route(_ index: Int) -> FetchRoute {
        let entry = entries[index]
        let leader = leaders.leader(of: index, in: entries)
        // A copy is tried first, for any entry with bytes (``EntryWork/copyLocally(_:)``). One
        // that waits for its leader asks once the leader is installed: a file DEST held before
        // comes first, then the leader's, before any seed.
        if entry.size > 0, let source = contentIndex?.source(for: entry, seeds: leader == nil) {
            source.file.close()
            return .copy(from: source.display)
        }
        if let leader { return .copy(from: display(entries[leader].path)) }
        // Only an entry with a chunk index needs its source's URL (resolved per entry).
        guard entry.chunks != nil, let url = firstSource(entry) else { return .whole(fetched: entry.size, noDelta: nil) }
        switch delta.prepare(entry, startsFromZero: true, url: url) {
        case .notTried:
            return .whole(fetched: entry.size, noDelta: nil)
        case .whole(let why, let indexBytes):
            return .whole(fetched: entry.size + indexBytes, noDelta: why.description)
        case .stopped(let indexBytes):
            return .whole(fetched: entry.size + indexBytes, noDelta: "stopped")
        case .delta(let layout):
            layout.old.file.close()
            return .delta(from: layout.old.display, atItsPath: layout.old.place == .destination, fetched: layout.fetchedBytes)
        }
    }
}

/// One content at several paths among the entries a run fetches from zero (docs/cli.md, "Reuse
/// by content"): the first in manifest order leads, and a later one with the same size and
/// digests waits for it and copies it (the rule of ``SyncRunner/holdDuplicates()``). Streamed, for
/// the dry run: 16 bytes per entry asked about, the place of the first of each content.
struct ContentLeaders {
    private var first: [UInt64: Int] = [:]

    /// The index of the entry `entries[index]` would wait for, or nil when it leads (or has no
    /// content key: an empty file, no SHA-256 or SHA-512).
    mutating func leader(of index: Int, in entries: [ManifestEntry]) -> Int? {
        let entry = entries[index]
        guard let key = ContentKey(entry) else { return nil }
        guard let leader = first[key.short] else {
            first[key.short] = index
            return nil
        }
        let other = entries[leader]
        return ContentKey(other) == key && other.digests == entry.digests ? leader : nil
    }
}
