/// Which failures `--summary` names, and how many it leaves to the log or `mirror status`
/// (docs/cli.md, "Output"): facts in (``FailureGroups``), a decision out, unit-tested without a
/// run (`Tests/MirrorCoreTests/Policy/FailureSummaryPolicyTests.swift`).
///
/// Cron mails whatever a run prints. A line per failed file made a mistyped `base_url` hundreds
/// of lines per machine per hour, and a stalled server tens; the administrator needs the cause,
/// the host and how many, and where the full list is. So: one line per group (cause and host),
/// the largest groups first, at most ``lines`` lines in all, the last of them saying how many
/// failed files were not named.
public struct FailureSummaryPolicy: Sendable, Equatable {
    /// The most lines the failures take, the "and N more" line included (at least 2).
    public var lines: Int
    /// The most paths named on a group's line.
    public var pathsPerLine: Int

    public init(lines: Int = 5, pathsPerLine: Int = 3) {
        self.lines = max(2, lines)
        self.pathsPerLine = max(1, pathsPerLine)
    }

    public struct Decision: Sendable, Equatable {
        /// The groups printed, a line each, in this order; `paths` holds the paths their line names.
        public var shown: [FailureGroups.Group]
        /// Failed files no printed line names: when above 0, the "and N more" line follows.
        public var more: Int
        /// Groups not printed at all.
        public var moreGroups: Int
    }

    /// Paths a group's line names: a group of one prints its file's own message, which names it.
    public func named(_ group: FailureGroups.Group) -> Int {
        min(group.count, group.paths.count, pathsPerLine)
    }

    public func decide(_ facts: FailureGroups) -> Decision {
        // Largest first; a tie keeps the order the groups first failed in.
        let ordered = facts.groups.enumerated()
            .sorted { $0.element.count != $1.element.count ? $0.element.count > $1.element.count : $0.offset < $1.offset }
            .map(\.element)
        let complete = ordered.count <= lines && facts.ungrouped == 0 && ordered.allSatisfy { named($0) == $0.count }
        let shown = (complete ? ordered : Array(ordered.prefix(lines - 1))).map { group in
            var group = group
            group.paths = Array(group.paths.prefix(pathsPerLine))
            return group
        }
        let namedCount = shown.reduce(0) { $0 + named($1) }
        return Decision(shown: shown, more: facts.total - namedCount, moreGroups: ordered.count - shown.count)
    }
}
