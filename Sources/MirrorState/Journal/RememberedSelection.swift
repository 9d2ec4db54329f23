import MirrorFS
import MirrorKit
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// `.mirror/selection`: the `--include`/`--exclude`/`--filter-from` rules of the last sync, so
/// that `status` and `verify` given none count the same entries the sync did instead of calling
/// the files it left out missing (docs/cli.md, "Choosing what a machine syncs"). Written by a
/// sync under DEST's lock when its rules differ from those recorded, removed when it has none;
/// replaced whole (``StateFile``). The format is a `--filter-from` file after a header: one
/// `+ PATTERN` or `- PATTERN` a line, in the order the rules were given.
public enum RememberedSelection {
    static let fileName = "selection"
    static let header = "mirror-selection 1"
    static let maximumSize = 4 << 20

    /// The rules recorded, nil when there are none (or the file does not parse: a status then
    /// counts every entry, as it did before selections were recorded). Only a file of this
    /// user's alone is read (``StateOwnership``): another's could hide missing files from `status`.
    public static func read(in state: FileDescriptor) throws -> [PathFilter.Rule]? {
        guard let text = try StateFile.read(fileName, in: state, trust: true, maximumSize: maximumSize),
              text.hasPrefix(header + "\n") else { return nil }
        let rules = try? PathFilter.rules(fromFile: Array(text.utf8.dropFirst(header.utf8.count + 1)), name: "the last sync's selection")
        // Named as the options they were given as, so that every message about a rule (one that
        // matches no entry) reads as it did for the sync.
        return rules.flatMap { $0.isEmpty ? nil : $0 }?.map {
            PathFilter.Rule($0.action, $0.pattern, origin: $0.action == .include ? "--include" : "--exclude")
        }
    }

    /// Records `rules` (nil or none: removes the record), unless the file already says the same.
    public static func write(_ rules: [PathFilter.Rule]?, in state: FileDescriptor) throws {
        guard let rules, !rules.isEmpty, let text = format(rules) else {
            if DiskChange.unlinkat(state.fd, fileName, 0) != 0 && errno != ENOENT {
                throw SystemError("remove", state.displayPath + "/" + fileName)
            }
            return
        }
        if let recorded = try? StateFile.read(fileName, in: state, trust: false, maximumSize: maximumSize), recorded == text { return }
        try StateFile.write(text, to: fileName, in: state)
    }

    /// The file's text; nil for a pattern a line cannot hold (a line break in it).
    public static func format(_ rules: [PathFilter.Rule]) -> String? {
        var text = header + "\n"
        for rule in rules {
            guard !rule.pattern.text.contains(where: { $0 == "\n" || $0 == "\r" }) else { return nil }
            text += (rule.action == .include ? "+ " : "- ") + rule.pattern.text + "\n"
        }
        return text
    }
}
