import MirrorFS
import MirrorModel

/// What one entry's work (``EntryWork``) asks of the run's loop (``SyncRunner``), which alone
/// holds the queues (``Scheduler``), the install batch (``Installer``), the summary, the
/// journal's failure records and how the run ends (``RunEnding``). The work decides; the loop
/// carries out what it returns, in order (docs/architecture.md, "An entry's life").
enum EntryEffect {
    /// The entry starts again at the loop's next turn (another source, from zero, a repair).
    case queue(EntryTask)
    /// The entry waits until a monotonic time (back-off, `Retry-After`; `.infinity`: not again
    /// in this run).
    case wait(EntryTask, until: Double)
    /// A request of the entry goes to its transfer thread (``RunThreads/submit(_:for:)``); the
    /// task already lists it.
    case submit(Download, EntryTask)
    /// Every byte of the entry is in its partial file: verify it and queue it for the commit.
    case install(EntryTask)
    /// The entry is given up: counted, reported and journaled as failed.
    case fail(EntryFailure)
    /// One more entry is left for a later run (the summary's pending count).
    case pending
    /// The run stops short, for this reason, unless it already stops for another.
    case stopShort(String)
    /// The destination refuses writes (full, read-only): the whole run stops, exit 73.
    case stopRun(SystemError)
    /// The entry at this path was never asked for: its host stopped answering earlier in the
    /// run. It is left for a later run, and entries waiting for its content may start.
    case notTried(path: String)
    /// A partial file of an earlier run was resumed: the bytes kept, and those read back to hash.
    case resumed(kept: Int64, rehashed: Int64)
    /// A resume was answered with the whole file (`200` to a `Range` request): the `dropped`
    /// bytes already there are fetched again. Said once per host a run (the cost has a cause).
    case rangeIgnored(source: String, path: String, dropped: Int64)
}

/// A failure of one entry, as `--summary`, `--json`, the journal and `status` show it.
struct EntryFailure {
    var entry: ManifestEntry
    var message: String
    /// No source could be reached (docs/faults.md, D3): a run whose every failure is of this
    /// kind exits 75, not 1.
    var unreachable: Bool
    /// What `--summary` groups it by, with the host of `source` (``FailureGroups``).
    var cause: FailureCause
    var source: String?
}
