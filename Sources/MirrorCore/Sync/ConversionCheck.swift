import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// Before a plain DEST becomes atomic (docs/cli.md, "Atomic destinations"): the first
/// generation holds the manifest's files and nothing else, so every other file of the plain
/// folder would be dropped by the switch. A file mirror installed and the manifest no longer
/// lists is mirror's to drop, as any publish drops it; a file mirror never installed (a user's
/// notes, a file only found in place, one changed since it was installed) is not: without
/// `--delete-unlisted` mirror deletes no file it did not install (docs/cli.md, "Deleting"), so
/// the conversion is refused, naming those files, before anything under DEST moves.
struct ConversionCheck {
    /// The files of the plain folder that are not mirror's to drop, and how many there are.
    struct Found: Sendable {
        var paths: [[UInt8]] = []
        var count = 0
    }

    /// At most this many paths are named in the refusal; the count says how many there are.
    static let named = 5

    /// Walks `plain` (``SetWalk``: a `fstatat` per file, a top-level folder per thread) and
    /// returns the files no manifest entry lists, no filter keeps and no journal record of an
    /// install vouches for (``Journal/records(for:)``: a `verified` record, not `found=1`, that
    /// matches the file's `stat`).
    /// `journal`: nil when DEST has none (a folder mirror never synced): nothing is vouched for.
    static func usersFiles(in plain: Destination, manifest: Manifest, journal: Journal?,
                           keepsExcluded: @escaping @Sendable ([UInt8]) -> Bool) throws -> Found {
        let listed = PathIndex(listing: manifest.entries)
        let parts = try SetWalk(set: plain).walk({ Found() }) { file, part in
            if file.path.withUnsafeBufferPointer({ listed.entryIndex($0) }) != nil || keepsExcluded(file.path) { return }
            if let path = String(validating: file.path, as: UTF8.self), let record = journal?.records(for: path)?.verified,
               !record.adopted, record.matches(file.status) {
                return
            }
            part.count += 1
            if part.paths.count < named { part.paths.append(file.path) }
        }
        var found = Found()
        for part in parts {
            found.count += part.count
            found.paths += part.paths
        }
        found.paths = Array(found.paths.sorted { $0.lexicographicallyPrecedes($1) }.prefix(named))
        return found
    }

    /// Refuses the conversion of the plain DEST at `destPath` (``SyncError/conversionRefused``)
    /// when it holds files that are not mirror's to drop and `--delete-unlisted` was not given.
    /// Reads DEST's journal (in `state`, if it has one) read-only: nothing under DEST changes.
    static func require(_ destPath: String, state: FileDescriptor?, manifest: Manifest, options: SyncOptions) throws {
        guard options.deletion != .unlisted, let plain = try Destination.openExisting(destPath) else { return }
        var st = stat()
        let hasJournal = state.map { fstatat($0.fd, Journal.fileName, &st, AT_SYMLINK_NOFOLLOW) == 0 } ?? false
        let journal = try state.flatMap { hasJournal ? try Journal(folder: $0, displayPath: plain.displayState(".mirror/journal"), readOnly: true) : nil }
        try require(plain, destPath: destPath, journal: journal, manifest: manifest, options: options)
    }

    /// The same on DEST opened (a dry run's ``ReadOnlyDestination``).
    static func require(_ plain: Destination, destPath: String, journal: Journal?, manifest: Manifest, options: SyncOptions) throws {
        guard options.deletion != .unlisted else { return }
        let filter = options.filter, deleteExcluded = options.deleteExcluded
        let found = try usersFiles(in: plain, manifest: manifest, journal: journal) { path in
            guard let filter, !deleteExcluded else { return false }
            return !filter.selects(path)
        }
        guard found.count > 0 else { return }
        throw SyncError.conversionRefused(destination: destPath, paths: found.paths.map { Formatting.printable(bytes: $0) },
                                          count: found.count)
    }

    /// Whether the run would turn the plain folder at `identity` into an atomic DEST now: DEST is
    /// a folder (not yet the symlink) and no `building/` of an interrupted conversion exists.
    /// Asked under DEST's lock, of any run that goes atomic (`--atomic`, or a DEST whose state
    /// already moved into its store).
    static func isDue(_ identity: DestinationIdentity) -> Bool {
        var st = stat()
        guard lstat(identity.path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return false }
        return lstat(identity.storePath + "/" + GenerationStore.buildingName, &st) != 0
    }
}
