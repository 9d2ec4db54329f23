#if canImport(Glibc)
import Glibc
#endif

extension PartialFile {
    /// Opens the partial file `name` in the partial folder, safely against whatever was planted there.
    ///
    /// - A download that starts from zero unlinks any old file of that name (`unlinkat` removes a
    ///   symlink itself, never its target) and creates a new one with `O_CREAT | O_EXCL | O_NOFOLLOW`,
    ///   mode 0600: unverified bytes are nobody's business, and `O_EXCL` guarantees the file is new,
    ///   not something another user made or linked in between.
    /// - A resumed download (an offset or a journal record to resume from) reopens the existing file with `O_NOFOLLOW` (a symlink fails with
    ///   `ELOOP`) and requires a regular file with one link (``SafePath/requireSoleRegularFile(_:_:)``),
    ///   because it will be truncated and written in place.
    static func open(_ name: String, in folder: FileDescriptor, displayPath: String, resuming: Bool) throws -> FileDescriptor {
        if resuming {
            let fd = SafePath.open(name, beneath: folder.fd, flags: O_RDWR)
            if fd >= 0 {
                let file = FileDescriptor(fd: fd, displayPath: displayPath)
                try SafePath.requireSoleRegularFile(fd, displayPath)
                return file
            }
            if errno == ELOOP {
                throw SystemError("resume", displayPath + " (a symlink was planted in its place)", code: ELOOP)
            }
            if errno != ENOENT { throw SystemError("open partial file", displayPath) }
        }
        if unlinkat(folder.fd, name, 0) != 0 && errno != ENOENT {
            throw SystemError("remove the old partial file", displayPath)
        }
        let fd = SafePath.open(name, beneath: folder.fd, flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
        if fd < 0 { throw SystemError("create partial file", displayPath) }
        return FileDescriptor(fd: fd, displayPath: displayPath)
    }
}
