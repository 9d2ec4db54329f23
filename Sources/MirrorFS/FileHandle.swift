import CLinux
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An open file descriptor, closed exactly once (in ``close()`` or `deinit`).
///
/// Used for regular files and directories alike. The `displayPath` is only for messages.
///
/// Sendable, unchecked: threads share a descriptor to read and write through it (`pread`,
/// `pwrite`, `fstat`, `*at` calls are safe on one descriptor from any thread); ``fd`` changes
/// only in ``close()``, which its owner calls once no other thread uses it (or `deinit` does,
/// when no one can), and `displayPath` never. A lock or an atomic around ``fd`` would cost on
/// every read and write of a buffer, for a change that happens once.
public final class FileDescriptor: @unchecked Sendable {
    public private(set) var fd: Int32
    public let displayPath: String

    public init(fd: Int32, displayPath: String) {
        self.fd = fd
        self.displayPath = displayPath
    }

    deinit { close() }

    public func close() {
        if fd >= 0 {
            _ = Glibc.close(fd)
            fd = -1
        }
    }

    /// `fsync(2)`: data and metadata on stable storage. For a directory this makes the entries
    /// created or renamed in it durable, which `rename(2)` alone does not. Returns the proof a
    /// journal record of this file's bytes needs (``Synced``); a folder's is dropped.
    @discardableResult
    public func sync() throws -> Synced {
        if retryingOnEINTR({ DiskChange.fsync(fd) }) != 0 { throw SystemError("sync", displayPath) }
        return Synced(of: try? stat(), wholeFileSystem: false)
    }

    /// `syncfs(2)`: everything written to the filesystem holding this descriptor, on stable storage,
    /// in one journal commit, where an `fsync` per file would pay one commit each. Returns the
    /// proof for records of any file on that file system (``Synced``).
    @discardableResult
    public func syncFilesystem() throws -> Synced {
        if retryingOnEINTR({ DiskChange.syncfs(fd) }) != 0 { throw SystemError("sync the filesystem of", displayPath) }
        return Synced(of: try? stat(), wholeFileSystem: true)
    }

    /// `fdatasync(2)`: the data (and the size) on stable storage, without the timestamps. Returns
    /// the proof a journal record of these bytes needs (``Synced``).
    @discardableResult
    public func syncData() throws -> Synced {
        if retryingOnEINTR({ DiskChange.fdatasync(fd) }) != 0 { throw SystemError("sync", displayPath) }
        return Synced(of: try? stat(), wholeFileSystem: false)
    }

    public func stat() throws -> FileStatus {
        var st = Glibc.stat()
        if fstat(fd, &st) != 0 { throw SystemError("stat", displayPath) }
        return FileStatus(st)
    }

    /// Writes all of `buffer` at `offset` (`pwrite(2)` in a loop: a short write is not an error).
    public func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) throws {
        guard var base = buffer.baseAddress else { return }
        var remaining = buffer.count
        var position = offset
        while remaining > 0 {
            let n = retryingOnEINTR { DiskChange.pwrite(fd, base, remaining, off_t(position)) }
            if n < 0 { throw SystemError("write", displayPath) }
            remaining -= n
            position += Int64(n)
            base += n
        }
    }

    /// Writes all of `bytes` with `write(2)` at the descriptor's position: a file opened with
    /// `O_APPEND`, or a stream (standard output of `manifest create`).
    public func append(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { raw in
            guard var base = raw.baseAddress else { return }
            var remaining = raw.count
            while remaining > 0 {
                let n = retryingOnEINTR { DiskChange.write(fd, base, remaining) }
                if n < 0 { throw SystemError("write", displayPath) }
                remaining -= n
                base += n
            }
        }
    }

    /// Allocates `length` bytes of blocks from `offset` without changing the file's size
    /// (`fallocate(2)` with `FALLOC_FL_KEEP_SIZE`), so appends into them need no free space later.
    /// Best effort: a file system without it (EOPNOTSUPP), or a full disk, leaves no reserve; the
    /// result says which, for the caller to stop asking where it cannot work.
    public func reserve(from offset: Int64, length: Int64) -> ReserveResult {
        if DiskChange.reserve(fd, offset, length) == 0 { return .reserved }
        return errno == EOPNOTSUPP || errno == ENOSYS ? .unsupported : .failed
    }

    public enum ReserveResult: Sendable { case reserved, unsupported, failed }

    /// Reads up to `buffer.count` bytes at `offset`; returns the count (0 at end of file).
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        let n = retryingOnEINTR { pread(fd, base, buffer.count, off_t(offset)) }
        if n < 0 { throw SystemError("read", displayPath) }
        return n
    }

    /// Reads the whole file from the start (for the journal and manifests, not for media), into
    /// one allocation of the size `fstat` reports, so a large journal is not copied while it grows.
    public func readAll() throws -> [UInt8] {
        let expected = Int(max(0, try stat().size))
        var out = [UInt8](repeating: 0, count: expected)
        var offset = 0
        while offset < out.count {
            let n = try out.withUnsafeMutableBytes { raw in
                try read(into: UnsafeMutableRawBufferPointer(rebasing: raw[offset...]), at: Int64(offset))
            }
            if n == 0 { break }
            offset += n
        }
        out.removeSubrange(offset...)
        // A file that grew since the fstat (it should not: the journal is ours, under the lock).
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = try chunk.withUnsafeMutableBytes { try read(into: $0, at: Int64(out.count)) }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
        }
        return out
    }

    public func truncate(to length: Int64) throws {
        if retryingOnEINTR({ DiskChange.ftruncate(fd, off_t(length)) }) != 0 { throw SystemError("truncate", displayPath) }
    }
}

extension FileDescriptor {
    /// The entry names of this open folder, as bytes, without `.` and `..` (`fdopendir`/`readdir`
    /// on a duplicate descriptor, since `closedir` closes the one it was given).
    package func entryNames() throws -> [[UInt8]] {
        try FileDescriptor.entryNames(ofFolder: fd, displayPath: displayPath)
    }

    /// ``entryNames()`` of a folder descriptor that no ``FileDescriptor`` owns (``FolderWalker``'s).
    static func entryNames(ofFolder folder: Int32, displayPath: String) throws -> [[UInt8]] {
        let fd = dup(folder)
        if fd < 0 { throw SystemError("read folder", displayPath) }
        var out: [[UInt8]] = []
        try forEachEntry(takingOver: fd, displayPath: displayPath) { name, _ in out.append(name) }
        return out
    }

    /// Calls `body` with each name of the folder `fd` (not `.` or `..`) and its `d_type`, from
    /// the start (`fdopendir`, `rewinddir`, `readdir`). Takes `fd` over: `closedir` closes it.
    static func forEachEntry(takingOver fd: Int32, displayPath: String, _ body: ([UInt8], UInt8) throws -> Void) throws {
        guard let dir = fdopendir(fd) else {
            let code = errno
            Glibc.close(fd)
            throw SystemError("read folder", displayPath, code: code)
        }
        defer { closedir(dir) }
        // A duplicate shares the folder's read position with the descriptor it copies: a second
        // listing would start where the first ended (and find nothing) without a rewind.
        rewinddir(dir)
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix(while: { $0 != 0 })) }
            if name == [UInt8(ascii: ".")] || name == [UInt8(ascii: "."), UInt8(ascii: ".")] { continue }
            try body(name, entry.pointee.d_type)
        }
    }
}

/// A point in time with nanosecond precision, as `struct timespec` holds it.
public struct FileTime: Sendable, Hashable, Comparable {
    public var seconds: Int64
    public var nanoseconds: Int64

    public init(seconds: Int64, nanoseconds: Int64 = 0) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    public static func < (a: FileTime, b: FileTime) -> Bool {
        (a.seconds, a.nanoseconds) < (b.seconds, b.nanoseconds)
    }
}

/// The parts of `struct stat` that decide whether a file is the one the journal recorded.
public struct FileStatus: Sendable, Equatable {
    public var size: Int64
    public var mode: UInt32
    public var inode: UInt64
    public var device: UInt64
    public var mtime: FileTime
    public var ctime: FileTime
    /// The owner's user id and the number of names the inode has: a partial file whose saved hash
    /// state is trusted must be this process's own, with one name (SECURITY.md, "local user").
    public var owner: UInt32
    public var links: UInt64

    public init(size: Int64, mode: UInt32, inode: UInt64, device: UInt64, mtime: FileTime, ctime: FileTime,
                owner: UInt32 = 0, links: UInt64 = 1) {
        self.size = size
        self.mode = mode
        self.inode = inode
        self.device = device
        self.mtime = mtime
        self.ctime = ctime
        self.owner = owner
        self.links = links
    }

    package init(_ st: Glibc.stat) {
        size = Int64(st.st_size)
        mode = UInt32(st.st_mode)
        inode = UInt64(st.st_ino)
        device = UInt64(st.st_dev)
        mtime = FileTime(seconds: Int64(st.st_mtim.tv_sec), nanoseconds: Int64(st.st_mtim.tv_nsec))
        ctime = FileTime(seconds: Int64(st.st_ctim.tv_sec), nanoseconds: Int64(st.st_ctim.tv_nsec))
        owner = UInt32(st.st_uid)
        links = UInt64(st.st_nlink)
    }

    /// Permission bits only (no file type).
    public var permissions: UInt32 { mode & 0o7777 }

    public var isRegularFile: Bool { mode & UInt32(S_IFMT) == UInt32(S_IFREG) }
    public var isDirectory: Bool { mode & UInt32(S_IFMT) == UInt32(S_IFDIR) }
    public var isSymlink: Bool { mode & UInt32(S_IFMT) == UInt32(S_IFLNK) }
}

extension FileDescriptor {
    public struct Space: Sendable, Equatable {
        /// Bytes an unprivileged writer may still use (`f_bavail × f_frsize`).
        public var available: Int64
        public var blockSize: Int64
    }

    /// The free space of this folder's file system (`fstatvfs(3)`).
    package func space() throws -> Space {
        var vfs = statvfs()
        guard fstatvfs(fd, &vfs) == 0 else { throw SystemError("measure the free space of", displayPath) }
        let block = Int64(vfs.f_frsize)
        return Space(available: Int64(vfs.f_bavail) * block, blockSize: block)
    }

    /// The bytes allocated to the file `name` in this folder (`st_blocks × 512`); 0 when absent.
    package func allocatedBytes(of name: String) -> Int64 {
        var st = Glibc.stat()
        guard fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0, st.st_mode & S_IFMT == S_IFREG else { return 0 }
        return Int64(st.st_blocks) * 512
    }
}
