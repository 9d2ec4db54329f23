import CLinux
import MirrorFS
#if canImport(Glibc)
import Glibc
#endif

extension PartialFile {
    /// Opens the partial file `name` in the partial folder, safely against whatever was planted there.
    ///
    /// - A download that starts from zero creates a new file with `O_CREAT | O_EXCL | O_NOFOLLOW`,
    ///   mode 0600: unverified bytes are nobody's business, and `O_EXCL` guarantees the file is new,
    ///   not something another user made or linked in between. Only when the name is taken
    ///   (`EEXIST`) is the old file unlinked first (`unlinkat` removes a symlink itself, never its
    ///   target): an `unlinkat` that finds nothing costs a folder lookup per file, which adds up
    ///   over thousands of small files.
    /// - A resumed download reopens the existing file with `O_NOFOLLOW` (a symlink fails with
    ///   `ELOOP`) and keeps it only when it is a regular file with one name, owned by this process's
    ///   effective uid, mode 0600 (or a mode without group or other write, set back to 0600: a
    ///   file sealed for an install that a crash cut short); a file anyone else could have written,
    ///   or linked elsewhere, is replaced by a new one (the download starts from zero), never
    ///   written in place or trusted.
    ///
    /// - A new download with `unnamed` is a file with no name in the partial folder (`O_TMPFILE`,
    ///   mode 0600, ``PartialNaming``): nothing anyone else could open, swap or link. Where the
    ///   filesystem has no `O_TMPFILE`, it is a named file as above.
    ///
    /// - Returns: the file, whether it is the existing one (`resumed`) or a new, empty one, and
    ///   whether it has no name.
    static func open(_ name: String, in folder: FileDescriptor, displayPath: String, resuming: Bool, unnamed: Bool = false,
                     records: PartialJournal?) throws -> (file: FileDescriptor, resumed: Bool, unnamed: Bool) {
        if resuming {
            let fd = SafePath.open(name, beneath: folder.fd, flags: O_RDWR)
            if fd >= 0 {
                let file = FileDescriptor(fd: fd, displayPath: displayPath)
                let st = try file.stat()
                // A mode other than 0600 without group or other write: sealed for install (the
                // Installer's `fchmod` to the manifest's mode) by a run that stopped, or lost
                // power, before the rename; still this user's own file that nobody else may
                // write, so it is set back to 0600 and resumed, not fetched again.
                if st.isRegularFile, st.links == 1, st.owner == geteuid(), st.permissions & 0o022 == 0,
                   st.permissions == 0o600 || DiskChange.fchmod(fd, 0o600) == 0 {
                    return (file, true, false)
                }
                file.close()
            } else if errno != ENOENT && errno != ELOOP {
                throw SystemError("open partial file", displayPath)
            }
            // Not ours to resume: the journal forgets it before a new file takes the name.
            try records?.forgetIfRecorded()
        }
        if unnamed && !resuming {
            let fd = openUnnamed(in: folder)
            if fd >= 0 {
                if ProcessUmask.narrows(0o600) { _ = DiskChange.fchmod(fd, 0o600) }
                return (FileDescriptor(fd: fd, displayPath: displayPath), false, true)
            }
            // No O_TMPFILE here (EOPNOTSUPP; EISDIR or EINVAL before Linux 3.11): a named file.
            guard errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL else {
                throw SystemError("create partial file", displayPath)
            }
        }
        // Usually nothing has the name: create at once, and remove an old file only when one is
        // there (EEXIST), then create again. Each try is O_EXCL, so the file is always new.
        var fd = SafePath.open(name, beneath: folder.fd, flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
        if fd < 0 && errno == EEXIST {
            if DiskChange.unlinkat(folder.fd, name, 0) != 0 && errno != ENOENT {
                throw SystemError("remove the old partial file", displayPath)
            }
            fd = SafePath.open(name, beneath: folder.fd, flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
        }
        if fd < 0 { throw SystemError("create partial file", displayPath) }
        let file = FileDescriptor(fd: fd, displayPath: displayPath)
        // The umask may have narrowed 0600 (to 0400, say); the mode is what resuming checks.
        if ProcessUmask.narrows(0o600) { _ = DiskChange.fchmod(fd, 0o600) }
        return (file, false, false)
    }

    /// Name of the file ``canLinkUnnamedFiles(in:)`` links and removes at once (not a partial
    /// file's name: the sweep leaves it alone, and the next try removes a leftover first).
    static let linkProbeName = "link-probe"

    /// Whether a file with no name can be made in `folder` and linked there (``PartialNaming``):
    /// tried for real, once a run, with the run's lock held. Four system calls.
    static func canLinkUnnamedFiles(in folder: FileDescriptor) -> Bool {
        let fd = openUnnamed(in: folder)
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        if DiskChange.linkOpenFile(fd, folder.fd, linkProbeName) != 0 {
            guard errno == EEXIST, DiskChange.unlinkat(folder.fd, linkProbeName, 0) == 0,
                  DiskChange.linkOpenFile(fd, folder.fd, linkProbeName) == 0 else { return false }
        }
        return DiskChange.unlinkat(folder.fd, linkProbeName, 0) == 0
    }

    /// A new file with no name in `folder` (``tmpfileFlag``), as a download and the probe make
    /// one; -1 with `errno` when it cannot be made.
    static func openUnnamed(in folder: FileDescriptor) -> Int32 {
        DiskChange.openat(folder.fd, ".", tmpfileFlag | O_RDWR | O_CLOEXEC, mode_t(0o600))
    }

    /// `O_TMPFILE` (Linux 3.11), which Swift's Glibc does not import (it is declared only with
    /// `_GNU_SOURCE`): `__O_TMPFILE | O_DIRECTORY`, with this architecture's `O_DIRECTORY`
    /// (0200000 on x86, 040000 on arm64) and the 020000000 of x86, arm64 and most others. Opening
    /// a folder with it makes a regular file there with no name, which disappears when its last
    /// descriptor closes, after a crash included (open(2)). Where the value differs (alpha,
    /// parisc, sparc) or the filesystem lacks it, the open fails and the file gets a name.
    static let tmpfileFlag: Int32 = O_DIRECTORY | 0o20000000
}
