import CLinux
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

extension Destination {
    // MARK: - Installing a verified file

    /// Moves a verified file into place: `renameat(2)` from the partial folder to `relative`, then
    /// `fsync` of the receiving folder so the new name is durable (docs/journal.md, rule 1). The rename
    /// is atomic: a reader sees the old file or the new one, never a mix. Returns the installed file's
    /// status, taken after the rename because rename changes the inode's ctime.
    /// With `syncFolder` false the caller makes the rename durable another way (one `syncfs` for a batch).
    ///
    /// With `expected` (the partial file the caller wrote, verified and sealed through its descriptor),
    /// the name in the partial folder must still be that very inode before the rename, and the final
    /// path must be it after: a symlink or another file swapped in under the partial's name while
    /// it downloaded is never installed (it would put a link to anywhere at a manifest path).
    /// The check before the rename and the rename are two calls on a name, so whoever can write
    /// in the partial folder can swap the name between them (`renameat2(RENAME_EXCHANGE)` in a
    /// loop; SECURITY.md). The check after it is on the final name in DEST: when that is not
    /// the inode we wrote, what the rename put there is removed (`unlinkat`, which removes a link
    /// itself and never follows it) before the entry fails, so no link stays at a manifest path.
    ///
    /// Per file of a batch of small files, each system call counts: the receiving folder stays open
    /// for the next file in it (``forgetInstallFolder()`` closes it at the end of a batch), and a
    /// path where nothing is yet is taken with `renameat2(RENAME_NOREPLACE)` without looking first;
    /// only a name already taken (`EEXIST`: a file to replace, or a folder in the way) is looked at.
    public func install(partial name: String, from partialFolder: FileDescriptor, to relative: String,
                        syncFolder: Bool = true, expected: FileDescriptor? = nil) throws -> FileStatus {
        try installFolder.withLock { kept in
            let opened = try installParent(of: relative, kept: &kept)
            var st = stat()
            let ours = try expected?.stat()
            if let ours {
                guard fstatat(partialFolder.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else {
                    throw SystemError("find the verified download of", display(relative))
                }
                guard FileStatus(st).sameFile(as: ours) else {
                    throw SystemError("install", display(relative) + " (its partial file was replaced during the download)", code: ELOOP)
                }
            }
            let (moved, parent, final) = try intoInstallFolder(of: relative, opened, kept: &kept) {
                DiskChange.renameNoReplace(partialFolder.fd, name, $0.fd, $1) == 0
            }
            if !moved {
                // EEXIST: something has the name. EINVAL: the filesystem has no RENAME_NOREPLACE.
                guard errno == EEXIST || errno == EINVAL || errno == ENOSYS else {
                    throw SystemError("move into place", display(relative))
                }
                if fstatat(parent.fd, final, &st, AT_SYMLINK_NOFOLLOW) == 0 && FileStatus(st).isDirectory {
                    throw SystemError("replace", display(relative) + " (a folder is in the way)", code: EISDIR)
                }
                if DiskChange.renameat(partialFolder.fd, name, parent.fd, final) != 0 {
                    throw SystemError("move into place", display(relative))
                }
            }
            return try placed(final, in: parent, relative: relative, ours: ours, syncFolder: syncFolder)
        }
    }

    /// Installs a verified file that has no name (`PartialNaming`): `linkat(2)` of the open
    /// file to `relative` (``mirror_link_open_file``), one new name in its folder, and nothing
    /// for anyone to swap, since nobody else can reach the file before it has a name. A link
    /// never replaces: when it fails (the name is taken: a file to replace, a folder in the way),
    /// the file is given its partial name (`name` in `partialFolder`) and installed as a named
    /// partial is, by a rename that replaces atomically, with that path's checks and errors (a
    /// folder in the way, another filesystem). A name it was given and could not move stays for
    /// the sweep at the end of the run; it has no journal record.
    /// `syncFolder` as for ``install(partial:from:to:syncFolder:expected:)``.
    public func install(unnamed file: FileDescriptor, name: String, partialFolder: FileDescriptor, to relative: String,
                        syncFolder: Bool = true) throws -> FileStatus {
        let linked: FileStatus? = try installFolder.withLock { kept in
            let (linked, parent, _) = try intoInstallFolder(of: relative, kept: &kept) { DiskChange.linkOpenFile(file.fd, $0.fd, $1) == 0 }
            guard linked else { return nil }
            // The new name is this very inode: a link makes it or fails, and never replaces.
            // Its status is the open file's (`fstat`, after the link changed its ctime), so the
            // journal vouches for the inode verified whatever happens to the name later; a
            // file swapped in afterwards fails the next run's compare (docs/journal.md, rule 3).
            // One call where `fstatat` of the name and a compare with the file took two.
            let status = try file.stat()
            if syncFolder { try parent.sync() }
            return status
        }
        if let linked { return linked }
        var named = DiskChange.linkOpenFile(file.fd, partialFolder.fd, name) == 0
        if !named && errno == EEXIST {
            // A file an earlier run left under this name; its journal record is gone already.
            if DiskChange.unlinkat(partialFolder.fd, name, 0) != 0 && errno != ENOENT { throw SystemError("remove the old partial file of", display(relative)) }
            named = DiskChange.linkOpenFile(file.fd, partialFolder.fd, name) == 0
        }
        guard named else { throw SystemError("name the verified download of", display(relative)) }
        return try install(partial: name, from: partialFolder, to: relative, syncFolder: syncFolder, expected: file)
    }

    /// After the rename or link that put a verified file at `final` in `parent`: its status, and,
    /// with `ours` (the file written, verified and sealed), proof that `final` is that very inode.
    /// Whatever else is there (swapped in between two calls on the name) is removed (`unlinkat`,
    /// which removes a link itself and never follows it) before the entry fails, so no link stays
    /// at a manifest path. Then the folder is synced when `syncFolder`.
    private func placed(_ final: String, in parent: FileDescriptor, relative: String, ours: FileStatus?,
                        syncFolder: Bool) throws -> FileStatus {
        var st = stat()
        if fstatat(parent.fd, final, &st, AT_SYMLINK_NOFOLLOW) != 0 {
            let code = errno
            if ours != nil { _ = DiskChange.unlinkat(parent.fd, final, 0) }
            throw SystemError("inspect", display(relative), code: code)
        }
        if let ours, !FileStatus(st).sameFile(as: ours) {
            let removed = DiskChange.unlinkat(parent.fd, final, 0) == 0 || errno == ENOENT
            if syncFolder { _ = try? parent.sync() }
            let what = FileStatus(st).isSymlink ? "a symbolic link" : "another file"
            throw SystemError("install", display(relative) + " (\(what) was swapped in for the verified download while it was moved into place; "
                              + (removed ? "it was removed" : "remove it; it is not the manifest's file") + ")", code: ELOOP)
        }
        if syncFolder { try parent.sync() }
        return FileStatus(st)
    }

    /// Closes the folder ``install(partial:from:to:syncFolder:expected:)`` kept open: at the end of
    /// a batch, so a folder replaced later is opened again by its path.
    public func forgetInstallFolder() {
        installFolder.withLock { $0 = nil }
    }

    /// `move` (a rename or a link of the verified file to the folder and name it is given, true
    /// when it succeeded) into the folder that receives `relative`. When the kept folder was
    /// removed (or moved) since the last file (`ENOENT`), it is opened again by its path and
    /// `move` tried once more; any other failure is left in `errno` for the caller. `opened`: that
    /// folder as ``installParent(of:kept:)`` gave it already. `kept`: ``installFolder``'s, whose
    /// lock the caller holds.
    private func intoInstallFolder(of relative: String, _ opened: (folder: FileDescriptor, name: String, cached: Bool)? = nil,
                                   kept installFolder: inout InstallFolder?,
                                   _ move: (FileDescriptor, String) -> Bool) throws -> (moved: Bool, folder: FileDescriptor, name: String) {
        var (parent, final, cached) = try opened ?? installParent(of: relative, kept: &installFolder)
        var moved = move(parent, final)
        if !moved && errno == ENOENT && cached {
            installFolder = nil
            (parent, final, cached) = try installParent(of: relative, kept: &installFolder)
            moved = move(parent, final)
        }
        return (moved, parent, final)
    }

    /// The folder that receives `relative` (created if missing, ``openParent(of:create:)``), the kept
    /// one when it is the same, and the final name. `kept`: ``installFolder``'s, whose lock the
    /// caller holds.
    private func installParent(of relative: String,
                               kept installFolder: inout InstallFolder?) throws -> (folder: FileDescriptor, name: String, cached: Bool) {
        let slash = relative.utf8.lastIndex(of: UInt8(ascii: "/"))
        let folderPath = slash.map { String(relative[..<$0]) } ?? ""
        if let kept = installFolder, kept.path == folderPath {
            return (kept.folder, slash.map { String(relative[relative.index(after: $0)...]) } ?? relative, true)
        }
        let (parent, final) = try openParent(of: relative, create: true)
        installFolder = InstallFolder(path: folderPath, folder: parent)
        return (parent, final, false)
    }
}
