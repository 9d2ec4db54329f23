import MirrorFS
import MirrorModel
import MirrorState

/// The selection the last sync of a DEST recorded (``RememberedSelection``), for `status` and
/// `verify` run without `--include`, `--exclude` or `--filter-from`: they then count the entries
/// that sync counted, not the files it left out as missing (docs/cli.md, "Choosing what a machine
/// syncs"). Read without the lock and trusting nothing else: a DEST with no state, or a record
/// that is not this user's or does not parse, has none.
public enum LastSelection {
    public static func of(destination: String) -> PathFilter? {
        guard let state = try? Destination.openExisting(destination)?.stateFolder(create: false),
              let rules = try? RememberedSelection.read(in: state) else { return nil }
        return PathFilter(rules: rules)
    }

    /// `--exclude 'media/' --include '*.txt'`: the rules as options (``PathFilter/Rule/description``),
    /// for the line that says so.
    public static func options(_ filter: PathFilter) -> String {
        filter.rules.map(\.description).joined(separator: " ")
    }
}
