import MirrorKit

/// Which hosts stopped answering during this run, from the failures of its attempts
/// (docs/faults.md, D3 "server down"): how many times in a row each host could not be reached
/// (``RetryPolicy/Facts/hostUnreachableFailures``), the hosts given up on, whose other files are
/// left for a later run without a request, and how many entries failed for that reason alone
/// (a run whose every failure is of this kind exits 75, "try again later", rather than 1).
///
/// A value the sync thread owns; hosts are keyed by scheme, host and port (``hostKey(of:)``).
struct HostReachability {
    private var failuresSinceAnswer: [String: Int] = [:]
    private var givenUp: Set<String> = []
    /// Entries that failed only because no source of theirs could be reached.
    private(set) var entriesFailedUnreachable = 0

    /// Notes an attempt at `url` that failed with `failure`; returns the host's failures to be
    /// reached since it last answered, this one included (0 when this one was not of that kind:
    /// the host answered).
    mutating func noteFailure(at url: String?, _ failure: TransferFailure) -> Int {
        let host = url.map(hostKey(of:)) ?? ""
        if failure.isUnreachable {
            failuresSinceAnswer[host, default: 0] += 1
        } else {
            failuresSinceAnswer[host] = nil
        }
        return failuresSinceAnswer[host] ?? 0
    }

    /// Gives up on `url`'s host for the rest of the run; true the first time, when the run says so.
    mutating func giveUp(on url: String) -> Bool {
        givenUp.insert(hostKey(of: url)).inserted
    }

    /// Whether `url`'s host was given up on: its files are not asked for again in this run.
    func isGivenUp(_ url: String) -> Bool {
        !givenUp.isEmpty && givenUp.contains(hostKey(of: url))
    }

    /// Notes an entry that failed; `unreachable` when none of its sources could be reached.
    mutating func noteEntryFailed(unreachable: Bool) {
        if unreachable { entriesFailedUnreachable += 1 }
    }
}
