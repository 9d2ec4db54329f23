import MirrorFS
import MirrorState

/// A listed path that something else holds: a file where the entry needs a folder (the manifest
/// listed `x`, now lists `x/y`), or a folder where it needs a file (the reverse). A republish that
/// turns a file into a folder is normal, so what mirror itself installed there, unchanged and no
/// longer listed, is replaced in the same run (docs/cli.md, "A path that turns"); anything else
/// blocks the entry, as before.
///
/// Facts in, decision out: what is in the way comes from the disk (``Destination/inTheWay(of:)``),
/// whether the journal vouches for a file from its `verified` record (``vouches(_:for:)``); this
/// type touches neither. Nothing in the way can be listed itself: a manifest that lists a path as a
/// file and as a folder is refused when it is read (``PathIndex``).
public enum PathTurn {
    /// What is in the way of a listed path (``Destination/inTheWay(of:)``).
    public typealias Found = InTheWay
    /// What may go so that the entry's file can be placed (``InTheWay/Clearance``).
    public typealias Clearance = InTheWay.Clearance

    public enum Decision: Sendable {
        /// Every file in the way is one mirror installed and nobody changed since: it goes when the
        /// new file is about to take its place.
        case replace(Clearance)
        /// Anything else: the entry fails, nothing there is touched.
        case block

        /// What goes, for ``replace(_:)``.
        public var clearance: Clearance? {
            if case .replace(let clearance) = self { return clearance }
            return nil
        }
    }

    /// Replace only a file, or a folder holding nothing but files, that mirror installed and that
    /// are unchanged since (`vouched`), plus the folders they leave empty: a folder with no such
    /// file beneath it (an empty folder, or one holding only other folders) is not known to be
    /// mirror's, so it blocks.
    /// `vouched(path, status)`: the journal's `verified` record of `path` vouches for `status`
    /// (``vouches(_:for:)``).
    public static func decide(_ found: Found, vouched: (String, FileStatus) -> Bool) -> Decision {
        guard !found.files.isEmpty else { return .block }
        var holding = Set<PathKey>()
        for item in found.files {
            // The journal only ever recorded UTF-8 paths (a manifest's): any other name is not mirror's.
            guard item.status.isRegularFile, let path = String(validating: item.path, as: UTF8.self),
                  vouched(path, item.status) else { return .block }
            holding.formUnion(Reconciler.folders(above: item.path))
        }
        guard found.folders.allSatisfy({ holding.contains(PathKey(bytes: $0)) }) else { return .block }
        let deepestFirst = found.folders.sorted { a, b in a.count != b.count ? a.count > b.count : a.lexicographicallyPrecedes(b) }
        return .replace(Clearance(files: found.files, folders: deepestFirst))
    }

    /// True when `record` says mirror installed the file (not `found=1`: a file it only found in
    /// place and hashed is the user's) and `status` is still that very file (inode, device, size,
    /// modification and change time; docs/journal.md, "`verified`").
    public static func vouches(_ record: VerifiedRecord?, for status: FileStatus) -> Bool {
        guard let record, !record.adopted else { return false }
        return record.matchesExactly(status)
    }
}
