/// What a run will do for one entry, decided from the disk and the journal before any request.
public enum PlannedAction: Equatable, Sendable {
    /// The journal verified this very file (same size, inode, mtime, ctime), and it is this user's
    /// with the entry's mode (``FoundFilePolicy``): nothing to do.
    case upToDate
    /// A file of the right size is there but the journal cannot vouch for it: hash it. A match is
    /// recorded; a mismatch is downloaded again, and replaced only once the new copy verifies.
    case check
    /// Continue an earlier run's partial download from this many durable bytes.
    case resume(from: Int64, record: PartialRecord)
    /// Fetch from zero. `replacing`: a different file is at the path now, or mirror's own file or
    /// folder is in the way of it (``PathTurn``); it stays until the new copy verifies.
    case download(replacing: Bool)
    /// Something that is not a regular file is at the path (a folder, a symlink, a device): the
    /// entry fails; nothing there is touched.
    case blocked(String)
}

public struct PlanItem: Sendable {
    public var entry: ManifestEntry
    public var action: PlannedAction
}

/// Compares the manifest with the destination and the journal (one `fstatat` per entry, and one
/// per partial file; no reads).
public struct Planner: Sendable {
    let destination: Destination?
    let journal: Journal?
    let partialFolder: FileDescriptor?

    public init(destination: Destination?, journal: Journal?, partialFolder: FileDescriptor?) {
        self.destination = destination
        self.journal = journal
        self.partialFolder = partialFolder
    }

    public func plan(_ manifest: Manifest) throws -> [PlanItem] {
        try manifest.entries.map { PlanItem(entry: $0, action: try action(for: $0)) }
    }

    /// The no-op path of ``action(for:)`` alone: the file's `stat` is the one the journal verified.
    /// true means ``action(for:)`` would say ``PlannedAction/upToDate``; false decides nothing.
    func isUpToDate(_ entry: ManifestEntry) -> Bool {
        guard let journal, let destination, let status = try? entry.pathBytes.withBytes({ try destination.status(ofBytes: $0) }) else {
            return false
        }
        return FoundFilePolicy.current.keeps(status, for: entry) && journal.isVerified(entry, status: status)
    }

    public func action(for entry: ManifestEntry) throws -> PlannedAction {
        var status: FileStatus?
        // Set when what is in the way is mirror's to replace (``PathTurn``): the entry is planned
        // as if its path were free, and the old file goes when the new one is installed (``Installer``).
        var turns = false
        do {
            status = try destination.flatMap { destination in try entry.pathBytes.withBytes { try destination.status(ofBytes: $0) } }
        } catch let error as SystemError where error.code == ENOTDIR {
            // One of its folders is a file.
            guard mayReplaceWhatIsInTheWay(of: entry.path) else { throw error }
            turns = true
        }
        // A record vouches only for this user's file with the entry's mode (``FoundFilePolicy``):
        // any other file is checked, and kept, fixed or copied there.
        let kept = status.map { FoundFilePolicy.current.keeps($0, for: entry) } ?? false
        // The no-op path: one stat and one journal line compared in place (docs/journal.md, rule 3).
        if let status, kept, let journal, journal.isVerified(entry, status: status) { return .upToDate }
        if let found = status, found.isDirectory, mayReplaceWhatIsInTheWay(of: entry.path) {
            status = nil
            turns = true
        }
        let records = journal?.records(for: entry.path)
        // Hex digests and a path string: made only when there is a record to compare them with
        // (none for any file of a first sync).
        let identity = records.map { _ in EntryIdentity(entry) }

        if let status {
            if !status.isRegularFile {
                let what = status.isDirectory ? "a folder" : status.isSymlink ? "a symbolic link" : "not a regular file"
                return .blocked("\(destination?.display(entry.path) ?? entry.path) is \(what); move it away so the file can be placed there")
            }
            if kept, let verified = records?.verified, verified.identity == identity, verified.matches(status) {
                return .upToDate
            }
        }
        if let partial = records?.partial, partial.identity == identity, partial.durableBytes > 0,
           let held = partialLength(for: entry.path) {
            // A segmented partial holds its segments at their offsets; ``PartialFile`` trims each
            // to what the file really holds. One stream: the durable prefix the file still has.
            let usable = partial.segments == nil ? min(held, partial.bytes) : (held > 0 ? partial.durableBytes : 0)
            if usable > 0 { return .resume(from: usable, record: partial) }
        }
        if let status {
            // A file the journal verified as another version of the entry, unchanged since, holds
            // that version's bytes: hashing it would only say so. It is replaced, and stays a
            // source for reuse by content (a swap of two files' contents copies each from the
            // other) until the new file is installed.
            if let verified = records?.verified, verified.matches(status), EntryIdentity.holdsOtherBytes(verified.identity, entry) {
                return .download(replacing: true)
            }
            return status.size == entry.size ? .check : .download(replacing: true)
        }
        return .download(replacing: turns)
    }

    /// Whether what is in the way of `path` (a file where one of its folders must be, or a folder
    /// at the path) is mirror's own, unchanged and unlisted, and may go (``PathTurn/decide(_:vouched:)``).
    /// Asked only when something is in the way.
    func mayReplaceWhatIsInTheWay(of path: String) -> Bool {
        guard let destination, let journal, let found = try? destination.inTheWay(of: path) else { return false }
        return PathTurn.decide(found) {
            InstalledFile.vouches(path: $0, status: $1, records: journal.records(for: $0), in: destination)
        }.clearance != nil
    }

    /// Length of the entry's partial file, if there is one.
    private func partialLength(for path: String) -> Int64? {
        guard let folder = partialFolder else { return nil }
        var st = stat()
        guard fstatat(folder.fd, PartialFile.name(for: path), &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        let status = FileStatus(st)
        return status.isRegularFile ? status.size : nil
    }
}

import MirrorFS
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif
