import MirrorKit
import MirrorModel

/// One line of `sync --dry-run --itemize` (docs/cli.md, "Itemized changes"), as `rsync -i` gives
/// one line per change for a review before a republish goes live, but in words and in a fixed
/// order that a script can split on spaces:
///
///     ACTION REASON BYTES SOURCE PATH
///
/// BYTES is what the run would receive from the network for the entry (0 for a copy, a check, a
/// deletion), exact, in bytes. SOURCE is the URL the first request would ask (credentials
/// masked), a `file://` URL for a copy from this machine, or `-`. PATH, last, may hold spaces;
/// control characters in it are escaped as in every other line (``Formatting/forPeople(_:)``).
/// No item line starts with `mirror:`, which the summary line at the end does.
public struct ItemizedChange: Equatable {
    enum Action: String {
        /// Fetched whole: no file at the path (`new`), or another version there (`changed`).
        case download, replace
        /// Another version at the path (or an older copy elsewhere) patched by a chunk delta.
        case delta
        /// A partial download of an earlier run continued.
        case resume
        /// Copied from a file on this machine with the same content.
        case copy
        /// A file at the path that the journal does not vouch for, hashed.
        case check
        /// Removed by `--delete`, `--delete-unlisted`, `--delete-excluded` or an atomic publish.
        case delete
        /// Not deleted: changed since mirror installed it.
        case keep
        /// Something that is not a regular file is in the way.
        case blocked
    }

    var action: Action
    /// One word: `new`, `changed`, `partial`, `same-content`, `unverified`, `unlisted`,
    /// `excluded`, `changed-since-installed`, `not-a-file`.
    var reason: String
    var bytes: Int64
    var source: String?
    var path: String

    var line: String { "\(action.rawValue) \(reason) \(bytes) \(source.map(redactedURL) ?? "-") \(path)" }

    /// A file on this machine, as a `file://` URL (percent-encoded, so it holds no space).
    public static func fileURL(_ path: String) -> String {
        "file://" + URLReference.encodePath(path.hasPrefix("/") ? path : "/" + path)
    }

    /// The change for an entry fetched from zero, by its route (``FetchRoute``).
    static func fetch(_ entry: ManifestEntry, replacing: Bool, _ route: FetchRoute, source: String?) -> ItemizedChange {
        let reason = replacing ? "changed" : "new"
        switch route {
        case .copy(let from):
            return ItemizedChange(action: .copy, reason: "same-content", bytes: 0, source: fileURL(from), path: entry.path)
        case .delta(_, _, let fetched):
            return ItemizedChange(action: .delta, reason: reason, bytes: fetched, source: source, path: entry.path)
        case .whole(let fetched, _):
            return ItemizedChange(action: replacing ? .replace : .download, reason: reason, bytes: fetched, source: source, path: entry.path)
        }
    }
}
