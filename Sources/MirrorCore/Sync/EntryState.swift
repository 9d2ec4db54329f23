/// Where one entry that needs bytes stands in a run. The run's loop (``SyncRunner``) moves an
/// ``EntryTask`` from state to state through ``EntryTask/move(to:)``, and each move must be one
/// of the life drawn in docs/architecture.md ("An entry's life"):
///
///     ready ──▶ fetching ──▶ installing ──▶ installed
///       ▲ │        │ │ │          │
///       │ │        │ │ └──▶ failed ◀┘          (given up; its failure is recorded)
///       │ │        │ └──▶ waiting(until:) ──▶ ready        (back-off, Retry-After)
///       │ │        └──▶ ready                              (next source, from zero, repair)
///       │ └──▶ heldForContent ──▶ ready                    (another entry fetches its content)
///       any state but the three ends ──▶ leftForLaterRun   (a stop, a host that stopped answering)
///
/// Which queue holds a task follows from its state (the scheduler's queue holds `ready`, its
/// waiting list `waiting`, its request table `fetching`, the installer's batch `installing`);
/// a move the drawing does not allow is a defect of the loop, caught by an assertion in debug
/// builds, which every test runs.
enum EntryState: Equatable, Sendable {
    /// Made and queued (or among the plan's entries): it starts when the scheduler has a slot.
    case ready
    /// Waiting out a back-off or a `Retry-After` until this monotonic time (``RetryPolicy``).
    case waiting(until: Double)
    /// An attempt is under way: its partial file is open, and requests run, or a local copy or a
    /// chunk delta is being laid out.
    case fetching
    /// Its bytes verified, queued for the group commit (``Installer``, ``InstallBatch``).
    case installing
    /// Waiting for another entry of the run that fetches the same content (``SyncRunner``'s
    /// `holdDuplicates`), which releases it when it ends.
    case heldForContent
    /// Renamed into place and journaled as verified; its task is retired.
    case installed
    /// Given up: its failure is counted, reported and journaled.
    case failed
    /// Not finished in this run, and not failed: the run stopped (deadline, signal, a full disk,
    /// the manifest republished), or its host stopped answering. A later run takes it up.
    case leftForLaterRun

    /// The states an entry never leaves.
    var isEnded: Bool {
        switch self {
        case .installed, .failed, .leftForLaterRun: return true
        default: return false
        }
    }

    /// Whether the drawing above has the move from this state to `next`.
    func allows(_ next: EntryState) -> Bool {
        if isEnded { return false }
        if next == .leftForLaterRun { return true }
        switch (self, next) {
        case (.ready, .fetching), (.ready, .heldForContent):
            return true
        case (.waiting, .ready):
            return true
        case (.fetching, .ready), (.fetching, .waiting), (.fetching, .installing), (.fetching, .failed):
            return true
        case (.installing, .installed), (.installing, .failed):
            return true
        case (.heldForContent, .ready):
            return true
        default:
            return false
        }
    }
}
