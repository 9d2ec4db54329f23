import MirrorFS
import MirrorKit
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

extension InstallCommit {
    /// Renames (or links) one verified, durable file into place. When the rename finds mirror's own
    /// file or folder in the way, unchanged and no longer listed (a file where the entry needs a
    /// folder: `ENOTDIR`; a folder at its path: `EISDIR`; ``PathTurn``), that goes and the rename
    /// is tried once more: only now, with the new file verified and durable, so a run that fails or
    /// is stopped earlier leaves the old file where it was. A crash between the removal and the
    /// rename leaves neither at the path (the new file waits in the partial folder, its bytes
    /// journaled for a named one); never a wrong file. The removed files' `forget path=... all=1`
    /// records go into `removed`, journaled with the batch (docs/journal.md, "`forget`").
    func install(_ item: Placement, syncFolder: Bool, removed: inout [JournalNote]) throws -> FileStatus {
        do {
            return try place(item, syncFolder: syncFolder)
        } catch let error as SystemError where error.code == ENOTDIR || error.code == EISDIR {
            let path = item.path
            // Decided again from the disk as it is now, not from the plan: whatever came since counts.
            guard let found = try destination.inTheWay(of: path),
                  let clearance = PathTurn.decide(found, vouched: { [journal, destination] in
                      InstalledFile.vouches(path: $0, status: $1, records: journal.records(for: $0), in: destination)
                  }).clearance else { throw error }
            CrashPoint.hit("turn-before-remove")
            let gone = try destination.clear(clearance)
            // Valid UTF-8: ``PathTurn/decide(_:vouched:)`` replaces only what the journal recorded.
            removed += gone.compactMap { String(validating: $0, as: UTF8.self) }.map { .removed(path: $0) }
            destination.forgetInstallFolder()
            CrashPoint.hit("turn-before-rename")
            return try placeAgain(item, syncFolder: syncFolder)
        }
    }

    /// The second try, once the way is clear. A file with no name that the first try named in the
    /// partial folder (its link met the file or folder in the way, then the rename did) goes by
    /// that name, renamed: linked again, the installed file would keep a second name in the
    /// partial folder, its recorded status (two links) would change when the sweep removes that
    /// name, and until then a later download under that name would write into the installed file.
    private func placeAgain(_ item: Placement, syncFolder: Bool) throws -> FileStatus {
        guard item.isUnnamed else { return try place(item, syncFolder: syncFolder) }
        var st = stat()
        guard fstatat(partialFolder.fd, item.name, &st, AT_SYMLINK_NOFOLLOW) == 0,
              FileStatus(st).sameFile(as: try item.file.stat()) else { return try place(item, syncFolder: syncFolder) }
        return try destination.install(partial: item.name, from: partialFolder, to: item.path,
                                       syncFolder: syncFolder, expected: item.file)
    }

    /// The rename (a named partial file) or link (one with no name, ``PartialNaming``) into place.
    private func place(_ item: Placement, syncFolder: Bool) throws -> FileStatus {
        return item.isUnnamed
            ? try destination.install(unnamed: item.file, name: item.name, partialFolder: partialFolder,
                                      to: item.path, syncFolder: syncFolder)
            : try destination.install(partial: item.name, from: partialFolder,
                                      to: item.path, syncFolder: syncFolder, expected: item.file)
    }
}
