#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Damage done to a file the way a crash, a full disk or a meddling person leaves it, for tests
/// that check what `mirror` makes of it. Every change is made in place (same inode) unless the
/// name says otherwise, because `mirror` recognises a file it verified by its inode and times.
public enum FileDamage {
    /// The file's size, or nil when nothing (or not a regular file) is at `path`.
    public static func size(of path: String) -> Int64? {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(st.st_size)
    }

    /// Writes `bytes` at `offset` over what is there (the size grows only if they reach past the end).
    public static func overwrite(_ path: String, at offset: Int64, with bytes: [UInt8]) throws {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw HarnessError.posix("open(\(path)) to overwrite it") }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
        guard written == bytes.count else { throw HarnessError.posix("pwrite(\(path))") }
    }

    /// Appends `bytes` at the end.
    public static func append(_ path: String, _ bytes: [UInt8]) throws {
        guard let size = size(of: path) else { throw HarnessError("append: no file at \(path)") }
        try overwrite(path, at: size, with: bytes)
    }

    /// Cuts the file to `length` bytes.
    public static func cut(_ path: String, to length: Int64) throws {
        guard truncate(path, off_t(length)) == 0 else { throw HarnessError.posix("truncate(\(path), \(length))") }
    }

    /// Puts a new file (a new inode) holding `bytes` at `path`, as an editor that saves by rename does.
    public static func replace(_ path: String, with bytes: [UInt8]) throws {
        let temporary = path + ".damage-tmp"
        try Data(bytes).write(to: URL(fileURLWithPath: temporary))
        guard rename(temporary, path) == 0 else { throw HarnessError.posix("rename(\(temporary), \(path))") }
    }
}
