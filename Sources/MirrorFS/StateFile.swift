import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// A small text file of DEST's state folder other than the journal (a rollback's `hold`, which
/// manifest built each generation, the sources whose file was refused), read and replaced whole.
/// Like the journal it must be this user's, writable by nobody else, and a regular file
/// (``StateOwnership``): anyone who could write it could steer every sync of DEST.
package enum StateFile {
    /// The file's text, nil when it does not exist. Opened without following a link; with
    /// `trust`, refused (`EPERM`, exit 73) unless this user's alone and a regular file.
    package static func read(_ name: String, in state: FileDescriptor, trust: Bool, maximumSize: Int) throws -> String? {
        let display = state.displayPath + "/" + name
        let fd = openat(state.fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw SystemError("open", display)
        }
        let file = FileDescriptor(fd: fd, displayPath: display)
        defer { file.close() }
        let status = try file.stat()
        guard status.isRegularFile, status.size <= maximumSize else {
            throw SystemError("trust", "\(display) (not a small regular file; remove it, and run again)", code: EPERM)
        }
        if trust { try StateOwnership.require(file, display) }
        return String(decoding: try file.readAll(), as: UTF8.self)
    }

    /// `name` replaced whole by `text`: `name.tmp` (mode 0600, `O_EXCL`), `fsync`, `renameat`,
    /// `fsync` of the folder.
    package static func write(_ text: String, to name: String, in state: FileDescriptor) throws {
        let temporary = name + ".tmp"
        let display = state.displayPath + "/" + temporary
        if DiskChange.unlinkat(state.fd, temporary, 0) != 0 && errno != ENOENT { throw SystemError("remove", display) }
        let fd = DiskChange.openat(state.fd, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd < 0 { throw SystemError("create", display) }
        let file = FileDescriptor(fd: fd, displayPath: display)
        do {
            try Array(text.utf8).withUnsafeBytes { try file.write($0, at: 0) }
            try file.sync()
            file.close()
        } catch {
            file.close()
            _ = DiskChange.unlinkat(state.fd, temporary, 0)
            throw error
        }
        if DiskChange.renameat(state.fd, temporary, state.fd, name) != 0 {
            let error = SystemError("rename", display)
            _ = DiskChange.unlinkat(state.fd, temporary, 0)
            throw error
        }
        try state.sync()
    }
}
