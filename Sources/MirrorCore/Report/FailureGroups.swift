/// The failures of a `--summary` run, counted by cause and host as they come (docs/cli.md,
/// "Output"): the facts ``FailureSummaryPolicy`` decides the printed lines from.
///
/// A mistyped `base_url` fails every entry for one cause at one host; printed a line each, that
/// was hundreds of lines of cron mail per machine per run. Only what the lines need is kept, a
/// few paths per group however many failed, so 10^6 failures cost as much as a handful.
public struct FailureGroups: Sendable, Equatable {
    /// What the failures of one group share: the typed cause and, for a server's, its
    /// `scheme://host:port`.
    public struct Key: Hashable, Sendable {
        public var cause: FailureCause
        public var host: String?

        public init(cause: FailureCause, host: String?) {
            self.cause = cause
            self.host = host
        }
    }

    public struct Group: Sendable, Equatable {
        public var key: Key
        public var count: Int
        /// The first paths that failed so, in the order they failed (display strings, never compared).
        public var paths: [String]
        /// The first failure's own message: a group of one prints it whole.
        public var firstMessage: String
    }

    /// In the order their first failure came.
    public private(set) var groups: [Group] = []
    /// Every failure added.
    public private(set) var total = 0
    /// Failures whose key came after ``maxGroups`` others: counted, not kept.
    public private(set) var ungrouped = 0
    private var index: [Key: Int] = [:]
    /// Paths kept per group.
    public let pathsKept: Int
    /// Groups kept: bounds the memory of a run whose entries name thousands of hosts.
    public let maxGroups: Int

    public init(pathsKept: Int = 3, maxGroups: Int = 256) {
        self.pathsKept = max(1, pathsKept)
        self.maxGroups = max(1, maxGroups)
    }

    public var isEmpty: Bool { total == 0 }

    public mutating func add(path: String, cause: FailureCause, host: String?, message: String) {
        total += 1
        let key = Key(cause: cause, host: cause.isRemote ? host : nil)
        if let i = index[key] {
            groups[i].count += 1
            if groups[i].paths.count < pathsKept { groups[i].paths.append(path) }
            return
        }
        guard groups.count < maxGroups else {
            ungrouped += 1
            return
        }
        index[key] = groups.count
        groups.append(Group(key: key, count: 1, paths: [path], firstMessage: message))
    }
}
