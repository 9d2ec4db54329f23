/// Which of a manifest's entries this machine syncs: the `--include`, `--exclude` and
/// `--filter-from` rules, in the order the command line gives them (docs/cli.md, "Choosing what a
/// machine syncs").
///
/// The last rule whose pattern matches a path decides, so a later, narrower rule refines an
/// earlier one: `--include 'courses/**' --exclude 'courses/old/**'`. A path no rule matches takes
/// the opposite of the first rule: a list that starts by including selects nothing else (what
/// `--include courses/bio101` alone means), one that starts by excluding keeps everything else.
/// rsync lets the first matching rule decide and keeps unmatched files; the order here is the one
/// a list of narrowing rules reads in, and the default is the one the first rule implies.
public struct PathFilter: Sendable {
    public enum Action: Sendable, Equatable {
        case include, exclude
    }

    public struct Rule: Sendable, Equatable {
        public let action: Action
        public let pattern: GlobPattern
        /// Where the rule was given, for messages: `--exclude`, or `FILE:LINE`.
        public let origin: String

        public init(_ action: Action, _ pattern: GlobPattern, origin: String) {
            self.action = action
            self.pattern = pattern
            self.origin = origin
        }

        /// The rule as the user wrote it: `--exclude '*.iso'`, or `rules.txt:3 (- *.iso)`.
        public var description: String {
            origin.hasPrefix("--") ? "\(origin) '\(pattern.text)'" : "\(origin) (\(action == .include ? "+" : "-") \(pattern.text))"
        }
    }

    public let rules: [Rule]

    public init(rules: [Rule]) { self.rules = rules }

    /// What a path that no rule matches gets.
    public var unmatched: Action { rules.first?.action == .include ? .exclude : .include }

    /// Whether the entry at `path` is synced.
    public func selects(_ path: UnsafeBufferPointer<UInt8>) -> Bool {
        for rule in rules.reversed() where rule.pattern.matches(path) { return rule.action == .include }
        return unmatched == .include
    }

    public func selects(_ path: [UInt8]) -> Bool { path.withUnsafeBufferPointer { selects($0) } }

    /// A manifest cut to the entries this machine syncs.
    public struct Selection: Sendable {
        public var manifest: Manifest
        /// Entries the rules left out.
        public var leftOut: Int
        /// Rules whose pattern matched no entry of the manifest: a typo, most likely (a warning).
        public var matchedNothing: [Rule]
    }

    /// The entries of `manifest` this filter selects, in manifest order, with how many it left out
    /// and which rules matched nothing. While a rule has matched no entry yet, every rule is tried
    /// on each entry (once: the decision comes from the same pass); after that, ``selects(_:)``.
    public func select(_ manifest: Manifest) -> Selection {
        var kept: [ManifestEntry] = []
        kept.reserveCapacity(manifest.entries.count)
        var matched = [Bool](repeating: false, count: rules.count)
        var unseen = rules.count
        for entry in manifest.entries {
            let selected = entry.pathBytes.withBytes { path in
                guard unseen > 0 else { return selects(path) }
                // Every rule is tried anyway: the last that matches decides, as in selects(_:).
                var decision = unmatched
                for (i, rule) in rules.enumerated() where rule.pattern.matches(path) {
                    decision = rule.action
                    if !matched[i] {
                        matched[i] = true
                        unseen -= 1
                    }
                }
                return decision == .include
            }
            if selected { kept.append(entry) }
        }
        var cut = manifest
        cut.entries = kept
        return Selection(manifest: cut, leftOut: manifest.entries.count - kept.count,
                         matchedNothing: rules.indices.filter { !matched[$0] }.map { rules[$0] })
    }

    /// A rules file's line that is not a rule.
    public struct FileError: Error, Sendable, CustomStringConvertible {
        public let file: String
        public let line: Int
        public let reason: String
        public var description: String { "\(file):\(line): \(reason)" }
    }

    /// The rules of a `--filter-from` file: one a line, `+ PATTERN` or `include PATTERN` to
    /// include, `- PATTERN` or `exclude PATTERN` to exclude (rsync's short and long forms); blank
    /// lines and lines starting with `#` or `;` are skipped. The pattern is the rest of the line
    /// after one space, spaces included.
    public static func rules(fromFile bytes: [UInt8], name: String) throws(FileError) -> [Rule] {
        var rules: [Rule] = []
        var number = 0
        for raw in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            number += 1
            var line = raw
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            guard let first = line.first, first != UInt8(ascii: "#"), first != UInt8(ascii: ";"),
                  line.contains(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }) else { continue }
            guard let text = String(validating: line, as: UTF8.self) else {
                throw FileError(file: name, line: number, reason: "the line is not UTF-8")
            }
            var action: Action?
            var pattern = ""
            for (prefix, meaning) in [("+ ", Action.include), ("- ", .exclude), ("include ", .include), ("exclude ", .exclude)]
            where text.hasPrefix(prefix) {
                action = meaning
                pattern = String(text.dropFirst(prefix.count))
                break
            }
            guard let action else {
                throw FileError(file: name, line: number, reason: "a rule is \"+ PATTERN\" or \"- PATTERN\" (or \"include PATTERN\", \"exclude PATTERN\"), got \"\(text)\"")
            }
            do {
                rules.append(Rule(action, try GlobPattern(pattern), origin: "\(name):\(number)"))
            } catch {
                throw FileError(file: name, line: number, reason: "pattern \"\(pattern)\": \(error.reason)")
            }
        }
        return rules
    }
}

extension GlobPattern.Problem {
    /// What is wrong, in words.
    public var reason: String {
        switch self {
        case .empty: return "the pattern is empty"
        case .unclosedClass: return "a \"[\" is not closed by \"]\" (write \"\\[\" for the character itself)"
        case .trailingBackslash: return "it ends with \"\\\", which escapes nothing (write \"\\\\\" for the character itself)"
        }
    }
}
