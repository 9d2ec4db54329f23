import MirrorFS
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

extension Reconciler {
    /// What deleting in `mode` would remove after `manifest`'s files are all in place
    /// (``DeletionPlan``). Read-only: `--dry-run` lists it, the run then carries it out.
    ///
    /// A path `filter` leaves out is not this machine's to delete (docs/cli.md, "Choosing what a
    /// machine syncs"): it is kept, and the journal's record of it too, unless `deleteExcluded`
    /// (`--delete-excluded`), and then only a file mirror installed and nobody changed since goes.
    public func deletions(for manifest: Manifest, mode: DeletionMode, filter: PathFilter? = nil,
                          deleteExcluded: Bool = false) throws -> DeletionPlan {
        guard let destination = planner.destination else { return DeletionPlan() }
        var plan = DeletionPlan()
        // The listed paths and their folders, pointing into the manifest's own bytes.
        let listed = PathIndex(listing: manifest.entries)
        var emptied = Set<PathKey>()
        switch mode {
        case .installed:
            let unlisted = self.unlisted(listed: listed)
            plan.known = journal?.verifiedCount ?? 0
            for record in unlisted {
                let path = record.identity.path
                if let filter, !deleteExcluded, !filter.selects(Array(path.utf8)) { continue }
                if record.adopted {
                    plan.stale.append(path)
                    continue
                }
                let status: FileStatus?
                do { status = try destination.status(of: path) } catch { status = nil }
                guard let status else {
                    plan.stale.append(path)
                    continue
                }
                guard record.matchesExactly(status) else {
                    plan.changed.append(path)
                    continue
                }
                plan.files.append(DeletionPlan.Item(path: Array(path.utf8), status: status))
                emptied.formUnion(Reconciler.folders(above: Array(path.utf8)))
            }
        case .unlisted:
            let tree = try destination.walk(skippingTopLevel: Destination.stateFolderName)
            let nested = NestedDestinations(tree)
            plan.known = tree.files.count
            for item in tree.files where !listed.containsFile(item.path) && !nested.contains(item.path) {
                if let filter, !filter.selects(item.path), !(deleteExcluded && isInstalledAsIs(item)) { continue }
                plan.files.append(DeletionPlan.Item(path: item.path, status: item.status))
            }
            // Every folder no listed entry lies in: with --delete-unlisted DEST holds the manifest's
            // files and nothing else, so an empty folder of the user's goes too.
            plan.keptFolders = Reconciler.listedFolders(in: tree, listed: listed)
            plan.otherDestinations = nested.roots
            let present = Set(tree.files.lazy.map { PathKey(bytes: $0.path) })
            for record in self.unlisted(listed: listed) where !present.contains(PathKey(record.identity.path)) {
                plan.stale.append(record.identity.path)
            }
        }
        plan.folders = emptied.lazy.map(\.bytes).filter { !listed.containsFolder($0) }
            .sorted { a, b in a.count != b.count ? a.count > b.count : a.lexicographicallyPrecedes(b) }
        return plan
    }

    /// Whether the journal says mirror installed this very file (not adopted, same inode, size
    /// and times): what `--delete-excluded` may remove of what the filter leaves out.
    func isInstalledAsIs(_ item: (path: [UInt8], status: FileStatus)) -> Bool {
        guard let path = String(validating: item.path, as: UTF8.self),
              let record = journal?.records(for: path)?.verified else { return false }
        return !record.adopted && record.matchesExactly(item.status)
    }

    /// The folders of `tree` that some listed entry lies in. A folder in one that is not listed
    /// is not either: only those in a listed folder (or at the top) are spelled out and looked up,
    /// so a chain of folders thousands deep costs no path per folder.
    static func listedFolders(in tree: Destination.Tree, listed: PathIndex) -> Set<PathKey> {
        var isListed = [Bool](repeating: false, count: tree.folders.count)
        var out = Set<PathKey>()
        for (i, folder) in tree.folders.enumerated() where folder.parent.map({ isListed[$0] }) ?? true {
            let path = tree.path(ofFolder: i)
            guard listed.containsFolder(path) else { continue }
            isListed[i] = true
            out.insert(PathKey(bytes: path))
        }
        return out
    }

    /// The folders `path` lies in, nearest first, DEST itself not included.
    static func folders(above path: [UInt8]) -> [PathKey] {
        var out: [PathKey] = []
        var p = path
        while let slash = p.lastIndex(of: UInt8(ascii: "/")) {
            p.removeSubrange(slash...)
            out.append(PathKey(bytes: p))
        }
        return out
    }
}
