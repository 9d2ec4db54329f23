import MirrorFS
import MirrorModel

/// What happened to one entry that changed or failed in a run.
public struct EntryResult: Sendable, Equatable {
    public enum Outcome: Sendable, Equatable {
        /// Fetched and installed where nothing was.
        case downloaded
        /// Fetched and installed over a different file that was at the path.
        case replaced
        /// Removed because the manifest no longer lists it (`--delete`, `--delete-unlisted`).
        case deleted
        case failed(String)
    }

    public var path: String
    public var outcome: Outcome
    public var size: Int64
    /// The URL that served the verified bytes (credentials masked).
    public var source: String?
    /// True when `source` is not the entry's first source (a mirror, after the first failed).
    public var fromMirror: Bool
    /// The file on this machine the bytes were copied from (reuse by content), when they were.
    public var copiedFrom: String?
    /// A chunk delta: the older copy its unchanged chunks came from, and how many bytes they were.
    public var deltaFrom: String?
    public var reusedBytes: Int64 = 0
    /// For a failure: its cause as a value and the `scheme://host:port` of the source last
    /// tried, which `--summary` groups failures by (``FailureGroups``).
    public var cause: FailureCause?
    public var host: String?

    public init(path: String, outcome: Outcome, size: Int64, source: String?, fromMirror: Bool = false) {
        self.path = path
        self.outcome = outcome
        self.size = size
        self.source = source
        self.fromMirror = fromMirror
    }
}

/// The result of a whole run, which decides the exit code (docs/cli.md, "Exit codes").
public enum SyncResult: Sendable, Equatable {
    /// Every entry is present and verified.
    case ok
    /// One or more entries failed; everything else was done and saved.
    case failed
    /// Stopped early (deadline, no source reachable); state is saved and a rerun continues.
    case incomplete(String)

    public var name: String {
        switch self {
        case .ok: return "ok"
        case .failed: return "failed"
        case .incomplete: return "incomplete"
        }
    }
}

public struct SyncSummary: Sendable {
    public var result: SyncResult = .ok
    /// The entries this run syncs: the manifest's, less those the filter left out.
    public var total = 0
    /// Manifest entries `--include`/`--exclude`/`--filter-from` left out (not in `total`).
    public var excluded = 0
    public var upToDate = 0
    /// Present but unknown to the journal, hashed, and found correct.
    public var checked = 0
    public var downloaded = 0
    public var replaced = 0
    public var failed = 0
    /// Of `failed`: the server still holds the file an earlier run refused, so it was not
    /// downloaded again (docs/cli.md, "A file the server holds wrong").
    public var refused = 0
    /// Of `failed`: the server could not be reached (connection refused, timed out, a name that
    /// does not resolve), so nothing is known to be wrong with the file (said "not reached").
    public var notReached = 0
    /// Not finished because the run stopped early.
    public var pending = 0
    /// Of `downloaded` and `replaced`: copied from a file on this machine (reuse by content).
    public var copied = 0
    /// Files removed by `--delete` or `--delete-unlisted` (not manifest entries: not in `total`).
    public var deleted = 0
    /// An atomic run that switched DEST to a new generation: which, and the one shown before.
    /// Said in the summary line even when no file was fetched (a roll forward after a rollback's
    /// hold is released links every file from the generations kept).
    public var published: Published?

    public struct Published: Equatable, Sendable {
        public var generation: Int
        public var previous: Int?

        public init(generation: Int, previous: Int?) {
            self.generation = generation
            self.previous = previous
        }
    }
    /// Why deleting was refused (``DeletionPolicy/refusal(_:)``): the run then fails (exit 1).
    public var deletionRefused: String?
    public var bytesTransferred: Int64 = 0
    /// What the run's requests saw of the network (``LinkSeen``).
    public var link = LinkSeen()
    /// Partial files of earlier runs this run continued, the bytes they kept, and how many of
    /// those were read back from disk to be hashed (docs/journal.md, rule 8).
    public var resumedFiles = 0
    public var resumedBytes: Int64 = 0
    public var rehashedBytes: Int64 = 0
    public var seconds = 0.0
    /// Each entry that changed or failed, for `--json` (``keepsResults``).
    public var results: [EntryResult] = []
    /// Whether ``add(_:)`` keeps results: only `--json` prints them at the end. The console, the
    /// log and the journal take each one as it comes; 10^6 results held to the end were ~250 MB.
    public var keepsResults = true
    /// For `--dry-run --json`: the plan, one line per entry that would change (the text report
    /// prints each line as it is planned and keeps none).
    public var plan = LineList()
    /// For `--dry-run`: what the plan adds up to.
    public var dryRun: DryRunTotals?
    /// Where the manifest came from (set by the session, which loaded it).
    public var manifest: ManifestProvenance?
    /// Unix end of the last run that ended `ok` on this destination, this one included; nil when none.
    public var lastSuccess: Int64?
    /// Set when the run changed nothing because DEST is held by a rollback (``HoldPolicy``).
    public var hold: RollbackHold?

    public init() {}

    /// The notice of a held run: where DEST is held, why, and how to go forward.
    public static func heldLine(_ hold: RollbackHold, dest: String) -> String {
        "\(dest) is held at generation \(hold.generation) by a rollback from generation \(hold.from), whose manifest this is: "
            + "nothing was changed; a sync of another manifest, or `\(HoldPolicy.releaseAdvice(dest))`, releases the hold"
    }

    /// An entry that changed or failed: kept for the report at the end when ``keepsResults``.
    public mutating func add(_ result: EntryResult) {
        if keepsResults { results.append(result) }
    }

    public var failures: [EntryResult] { results.filter { if case .failed = $0.outcome { return true } else { return false } } }
    public var changed: Int { downloaded + replaced }
}
