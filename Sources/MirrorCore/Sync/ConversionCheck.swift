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
///
/// Another DEST inside the plain folder (a folder holding a `.mirror` state folder, as
/// ``NestedDestinations`` finds them) refuses the conversion even with `--delete-unlisted`: a
/// generation is one manifest's set, so the nested DEST would be dropped, while `--delete-unlisted`
/// leaves nested destinations whole (docs/cli.md, "Deleting").
struct ConversionCheck {
    /// The files of the plain folder that are not mirror's to drop, and how many there are; the
    /// folders that are other destinations (their files not counted).
    struct Found: Sendable {
        var paths: [[UInt8]] = []
        var count = 0
        var nested: Set<[UInt8]> = []
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
            if let owner = nestedOwner(of: file.path) {
                part.nested.insert(owner)
                return
            }
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
            found.nested.formUnion(part.nested)
        }
        found.paths = Array(found.paths.sorted { $0.lexicographicallyPrecedes($1) }.prefix(named))
        return found
    }

    /// The DEST whose state folder holds the file at `path` (`A/B/.mirror/journal` gives `A/B`;
    /// `A/B.generations/.mirror/journal`, an atomic DEST's store, gives `A/B` too). Nil for a
    /// file of no state folder.
    static func nestedOwner(of path: [UInt8]) -> [UInt8]? {
        let state = Array(Destination.stateFolderName.utf8)
        var start = 0
        var index = 0
        while index <= path.count {
            if index == path.count || path[index] == UInt8(ascii: "/") {
                // A component named `.mirror` with something below it, below the top level (the
                // outer DEST's own `.mirror` is not walked).
                if start > 0, index < path.count, path[start..<index].elementsEqual(state) {
                    // An atomic DEST's state is in its store, `NAME.generations`: name the DEST.
                    let owner = Array(path[0..<(start - 1)])
                    let suffix = Array(GenerationStore.suffix.utf8)
                    return owner.count > suffix.count && owner.suffix(suffix.count).elementsEqual(suffix) ? Array(owner.dropLast(suffix.count)) : owner
                }
                start = index + 1
            }
            index += 1
        }
        return nil
    }

    /// Refuses the conversion of the plain DEST at `destPath` (``SyncError/conversionRefused``)
    /// when it holds files that are not mirror's to drop and `--delete-unlisted` was not given,
    /// or another DEST (``SyncError/conversionOfNested``) whatever the options. Reads DEST's
    /// journal (in `state`, if it has one) read-only: nothing under DEST changes.
    static func require(_ destPath: String, state: FileDescriptor?, manifest: Manifest, options: SyncOptions) throws {
        guard let plain = try Destination.openExisting(destPath) else { return }
        var st = stat()
        let hasJournal = state.map { fstatat($0.fd, Journal.fileName, &st, AT_SYMLINK_NOFOLLOW) == 0 } ?? false
        let journal = try state.flatMap { hasJournal ? try Journal(folder: $0, displayPath: plain.displayState(".mirror/journal"), readOnly: true) : nil }
        try require(plain, destPath: destPath, journal: journal, manifest: manifest, options: options)
    }

    /// The same on DEST opened (a dry run's ``ReadOnlyDestination``).
    static func require(_ plain: Destination, destPath: String, journal: Journal?, manifest: Manifest, options: SyncOptions) throws {
        let filter = options.filter, deleteExcluded = options.deleteExcluded
        let found = try usersFiles(in: plain, manifest: manifest, journal: journal) { path in
            guard let filter, !deleteExcluded else { return false }
            return !filter.selects(path)
        }
        if !found.nested.isEmpty {
            throw SyncError.conversionOfNested(destination: destPath, nested: found.nested.sorted { $0.lexicographicallyPrecedes($1) }
                .prefix(named).map { Formatting.printable(bytes: $0) }, count: found.nested.count)
        }
        guard options.deletion != .unlisted, found.count > 0 else { return }
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
