import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState

/// The sources whose file an earlier run refused (``RefusedSources``, `DEST/.mirror/refused`), as
/// this run uses and changes them, on the sync thread: a source that gave the same wrong digest
/// twice is asked next time with its validator as a condition, and a 304 fails the entry at once
/// with no download (docs/cli.md, "A file the server holds wrong"). A refusal goes when its entry
/// installs, or when the manifest no longer lists its path with that identity.
final class RefusedBook {
    private var byPath: [String: [RefusedSource]] = [:]
    private(set) var changed = false

    init(_ list: [RefusedSource]) {
        for refused in list { byPath[refused.identity.path, default: []].append(refused) }
    }

    /// How long a refusal stands, in seconds: a day. A server can change a file without changing
    /// its validator (the same size and modification time, an ETag made of them), and then only
    /// a download tells; so once a day the file is fetched again, as before refusals were kept.
    static let lifetime: Int64 = 24 * 3600

    /// The refusal of `url` (credentials masked, as recorded) for exactly this version of
    /// `entry`, if it is younger than ``lifetime`` at `now` (Unix seconds).
    func refusal(for entry: ManifestEntry, url: String, now: Int64 = Int64(currentUnixTime())) -> RefusedSource? {
        guard let list = byPath[entry.path] else { return nil }
        let masked = redactedURL(url), identity = EntryIdentity(entry)
        return list.first { $0.url == masked && $0.identity == identity && now - $0.at < RefusedBook.lifetime }
    }

    func record(_ refused: RefusedSource) {
        var list = byPath[refused.identity.path] ?? []
        list.removeAll { $0.url == refused.url }
        list.append(refused)
        byPath[refused.identity.path] = list
        changed = true
    }

    /// The entry at `path` installed: nothing of it is refused any more.
    func clear(path: String) {
        if byPath.removeValue(forKey: path) != nil { changed = true }
    }

    /// Writes the file when this run changed it, keeping only what the manifest still lists with
    /// the same identity (a left-out path keeps its refusals: `listed` says nil for it).
    func save(in state: FileDescriptor, identity listed: (String) -> EntryIdentity??) throws {
        for (path, list) in byPath {
            guard let wanted = listed(path) else { continue }
            let kept = list.filter { $0.identity == wanted }
            if kept.count != list.count {
                byPath[path] = kept.isEmpty ? nil : kept
                changed = true
            }
        }
        guard changed else { return }
        try RefusedSources.write(byPath.keys.sorted().flatMap { byPath[$0] ?? [] }, in: state)
        changed = false
    }

    var isEmpty: Bool { byPath.isEmpty }
}
