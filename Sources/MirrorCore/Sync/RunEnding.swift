import MirrorFS
import MirrorKit

/// What stopped a run short of doing all its work, as the run learns it, and the result it ends
/// with (docs/cli.md, "Exit codes"): a destination that refuses writes (exit 73), files that do not
/// fit, a stop (signal, deadline, a republish: exit 75), entries never asked for because their
/// host had stopped answering. A value the sync thread owns; ``result(summary:failedUnreachable:)``
/// is a pure decision, tested without a run.
struct RunEnding {
    /// A destination error that stops the whole run (disk full, read-only): exit 73.
    var fatal: SystemError?
    /// The files to fetch do not fit (``SpaceCheck``): the run stopped before its first request.
    var spaceStop: Error?
    /// Why the run stopped before its end: a signal, the deadline, the manifest changing.
    var stoppedReason: String?
    /// Entries never asked for because their host had stopped answering (counted as not finished).
    var notTried = 0

    /// `error` stops the run as ``fatal``, unless an earlier destination error already does: the
    /// first one is what the run reports.
    mutating func keepFirstFatal(_ error: SystemError) {
        if fatal == nil { fatal = error }
    }

    /// The run stops for `reason`, unless it already stops for another, which it keeps.
    mutating func keepFirstStop(_ reason: String) {
        if stoppedReason == nil { stoppedReason = reason }
    }

    /// Nothing stopped the run and nothing was left untried: with every file verified, deletions
    /// may go ahead (docs/cli.md, "Deleting").
    var ranToItsEnd: Bool { fatal == nil && spaceStop == nil && stoppedReason == nil && notTried == 0 }

    /// The run's result from what ended it and the summary's failures: stopped (incomplete, with
    /// the reason), every failure only a host that could not be reached (incomplete: try again
    /// later), failures or a refused deletion (failed), a destination or space stop (failed);
    /// otherwise the summary's own result.
    func result(summary: SyncSummary, failedUnreachable: Int) -> SyncResult {
        if let stoppedReason { return .incomplete(stoppedReason) }
        if (summary.failed > 0 || notTried > 0) && summary.failed == failedUnreachable {
            return .incomplete("no source could be reached")
        }
        if summary.failed > 0 || summary.deletionRefused != nil || fatal != nil || spaceStop != nil { return .failed }
        return summary.result
    }
}
