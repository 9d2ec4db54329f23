import CLinux
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// Every system call through which `mirror` changes DEST, its store (`.mirror/`, the generations,
/// the partial files) or its state (the journal, the lock file): the one door, so that a test can
/// see each change with the bytes it wrote and build from them the states a power cut can leave
/// (docs/journal.md, "Power loss, as the tests model it").
///
/// Each function has the C call's name, arguments and result (-1 and `errno` on failure), so a
/// call site changes by its prefix alone. `ArchitectureTests.mutatingCallsGoThroughDiskChange`
/// fails when a mutating call appears anywhere else in `Sources/`; what `mirror` writes that is
/// not DEST's (the output of `manifest create` and `manifest sign`, `--json`, `--metrics-file`
/// and `--log-file`, standard output) is outside the model and named in that test.
///
/// With `MIRROR_TEST_TRACE=FILE` in the environment each call is appended to FILE
/// (``DiskTrace``), made under one lock together with its record, so that the trace's order is
/// the order the calls took effect in. Without it a call costs one test of a value read once at
/// start-up, as ``CrashPoint`` does.
package enum DiskChange {
    /// The recorder, or nil in a normal run.
    @usableFromInline static let trace: DiskTrace? = DiskTrace.fromEnvironment()

    // MARK: - Creating and opening for writing

    /// `openat(2)`. A descriptor opened to write (`O_WRONLY`, `O_RDWR`, `O_CREAT`, `O_TRUNC`,
    /// `O_TMPFILE`) is recorded with its path and inode; one opened to read is not.
    @inlinable @discardableResult
    package static func openat(_ dirfd: Int32, _ path: UnsafePointer<CChar>, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
        guard let trace else { return Glibc.openat(dirfd, path, flags, mode) }
        return trace.opening(flags: flags) { Glibc.openat(dirfd, path, flags, mode) }
    }

    /// Any other call that opens a file (``SafePath``'s `openat2`): `body` makes the call.
    @inlinable @discardableResult
    package static func opening(flags: Int32, _ body: () -> Int32) -> Int32 {
        guard let trace else { return body() }
        return trace.opening(flags: flags, body)
    }

    // MARK: - Names

    /// `mkdirat(2)`.
    @inlinable @discardableResult
    package static func mkdirat(_ dirfd: Int32, _ path: UnsafePointer<CChar>, _ mode: mode_t) -> Int32 {
        guard let trace else { return Glibc.mkdirat(dirfd, path, mode) }
        return trace.named(.mkdir, dirfd, path, mode: mode) { Glibc.mkdirat(dirfd, path, mode) }
    }

    /// `mkdir(2)` of a path from the current folder.
    @inlinable @discardableResult
    package static func mkdir(_ path: UnsafePointer<CChar>, _ mode: mode_t) -> Int32 {
        mkdirat(AT_FDCWD, path, mode)
    }

    /// `symlinkat(2)`.
    @inlinable @discardableResult
    package static func symlinkat(_ target: UnsafePointer<CChar>, _ dirfd: Int32, _ path: UnsafePointer<CChar>) -> Int32 {
        guard let trace else { return Glibc.symlinkat(target, dirfd, path) }
        return trace.named(.symlink, dirfd, path, target: target) { Glibc.symlinkat(target, dirfd, path) }
    }

    /// `unlinkat(2)`, of a file or (with `AT_REMOVEDIR`) an empty folder.
    @inlinable @discardableResult
    package static func unlinkat(_ dirfd: Int32, _ path: UnsafePointer<CChar>, _ flags: Int32) -> Int32 {
        guard let trace else { return Glibc.unlinkat(dirfd, path, flags) }
        return trace.named(flags & AT_REMOVEDIR != 0 ? .rmdir : .unlink, dirfd, path) { Glibc.unlinkat(dirfd, path, flags) }
    }

    /// `renameat(2)`.
    @inlinable @discardableResult
    package static func renameat(_ olddirfd: Int32, _ oldpath: UnsafePointer<CChar>, _ newdirfd: Int32, _ newpath: UnsafePointer<CChar>) -> Int32 {
        guard let trace else { return Glibc.renameat(olddirfd, oldpath, newdirfd, newpath) }
        return trace.pair(.rename, olddirfd, oldpath, newdirfd, newpath) { Glibc.renameat(olddirfd, oldpath, newdirfd, newpath) }
    }

    /// `renameat2(2)` with `RENAME_NOREPLACE`.
    @inlinable @discardableResult
    package static func renameNoReplace(_ olddirfd: Int32, _ oldpath: UnsafePointer<CChar>, _ newdirfd: Int32, _ newpath: UnsafePointer<CChar>) -> Int32 {
        guard let trace else { return mirror_rename_noreplace(olddirfd, oldpath, newdirfd, newpath) }
        return trace.pair(.rename, olddirfd, oldpath, newdirfd, newpath) { mirror_rename_noreplace(olddirfd, oldpath, newdirfd, newpath) }
    }

    /// `renameat2(2)` with `RENAME_EXCHANGE`.
    @inlinable @discardableResult
    package static func renameExchange(_ olddirfd: Int32, _ oldpath: UnsafePointer<CChar>, _ newdirfd: Int32, _ newpath: UnsafePointer<CChar>) -> Int32 {
        guard let trace else { return mirror_rename_exchange(olddirfd, oldpath, newdirfd, newpath) }
        return trace.pair(.exchange, olddirfd, oldpath, newdirfd, newpath) { mirror_rename_exchange(olddirfd, oldpath, newdirfd, newpath) }
    }

    /// `linkat(2)`.
    @inlinable @discardableResult
    package static func linkat(_ olddirfd: Int32, _ oldpath: UnsafePointer<CChar>, _ newdirfd: Int32, _ newpath: UnsafePointer<CChar>, _ flags: Int32) -> Int32 {
        guard let trace else { return Glibc.linkat(olddirfd, oldpath, newdirfd, newpath, flags) }
        return trace.pair(.link, olddirfd, oldpath, newdirfd, newpath) { Glibc.linkat(olddirfd, oldpath, newdirfd, newpath, flags) }
    }

    /// `linkat(2)` of an open file by its `/proc/self/fd` link (a file made with `O_TMPFILE`).
    @inlinable @discardableResult
    package static func linkOpenFile(_ fd: Int32, _ newdirfd: Int32, _ newpath: UnsafePointer<CChar>) -> Int32 {
        guard let trace else { return mirror_link_open_file(fd, newdirfd, newpath) }
        return trace.linkOpen(fd, newdirfd, newpath) { mirror_link_open_file(fd, newdirfd, newpath) }
    }

    // MARK: - Contents

    /// `pwrite(2)`.
    @inlinable @discardableResult
    package static func pwrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int, _ offset: off_t) -> Int {
        guard let trace else { return Glibc.pwrite(fd, buffer, count, offset) }
        return trace.pwrite(fd, buffer, count, offset)
    }

    /// `write(2)` at the descriptor's position (the journal, opened `O_APPEND`).
    @inlinable @discardableResult
    package static func write(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
        guard let trace else { return Glibc.write(fd, buffer, count) }
        return trace.write(fd, buffer, count)
    }

    /// `copy_file_range(2)`; recorded as the bytes it put into `outfd`, read back.
    @inlinable @discardableResult
    package static func copyFileRange(_ infd: Int32, _ inoff: UnsafeMutablePointer<Int64>, _ outfd: Int32,
                                      _ outoff: UnsafeMutablePointer<Int64>, _ length: UInt) -> Int64 {
        guard let trace else { return mirror_copy_file_range(infd, inoff, outfd, outoff, length) }
        return trace.copyFileRange(infd, inoff, outfd, outoff, length)
    }

    /// `ioctl(FICLONE)`: `fd` shares `source`'s blocks; recorded as `fd`'s whole content, read back.
    @inlinable @discardableResult
    package static func clone(_ fd: Int32, from source: Int32, request: UInt) -> Int32 {
        guard let trace else { return ioctl(fd, request, source) }
        return trace.clone(fd) { ioctl(fd, request, source) }
    }

    /// `ftruncate(2)`.
    @inlinable @discardableResult
    package static func ftruncate(_ fd: Int32, _ length: off_t) -> Int32 {
        guard let trace else { return Glibc.ftruncate(fd, length) }
        return trace.onFile(.truncate, fd, length: Int64(length)) { Glibc.ftruncate(fd, length) }
    }

    /// `posix_fallocate(3)`: blocks for the range, the size grown to cover it (a result, not `errno`).
    @inlinable @discardableResult
    package static func posixFallocate(_ fd: Int32, _ offset: off_t, _ length: off_t) -> Int32 {
        guard let trace else { return posix_fallocate(fd, offset, length) }
        return trace.onFile(.allocate, fd, offset: Int64(offset), length: Int64(length)) { posix_fallocate(fd, offset, length) == 0 ? 0 : -1 }
    }

    /// `fallocate(2)` with `FALLOC_FL_KEEP_SIZE`: blocks only, the size unchanged.
    @inlinable @discardableResult
    package static func reserve(_ fd: Int32, _ offset: Int64, _ length: Int64) -> Int32 {
        guard let trace else { return mirror_reserve(fd, offset, length) }
        return trace.onFile(.reserve, fd, offset: offset, length: length) { mirror_reserve(fd, offset, length) }
    }

    /// `fchmod(2)`.
    @inlinable @discardableResult
    package static func fchmod(_ fd: Int32, _ mode: mode_t) -> Int32 {
        guard let trace else { return Glibc.fchmod(fd, mode) }
        return trace.onFile(.chmod, fd, length: Int64(mode)) { Glibc.fchmod(fd, mode) }
    }

    /// `futimens(2)`.
    @inlinable @discardableResult
    package static func futimens(_ fd: Int32, _ times: UnsafePointer<timespec>) -> Int32 {
        guard let trace else { return Glibc.futimens(fd, times) }
        return trace.onFile(.times, fd) { Glibc.futimens(fd, times) }
    }

    // MARK: - Durability

    /// `fsync(2)`.
    @inlinable @discardableResult
    package static func fsync(_ fd: Int32) -> Int32 {
        guard let trace else { return Glibc.fsync(fd) }
        return trace.onFile(.fsync, fd) { Glibc.fsync(fd) }
    }

    /// `fdatasync(2)`.
    @inlinable @discardableResult
    package static func fdatasync(_ fd: Int32) -> Int32 {
        guard let trace else { return Glibc.fdatasync(fd) }
        return trace.onFile(.fdatasync, fd) { Glibc.fdatasync(fd) }
    }

    /// `syncfs(2)`.
    @inlinable @discardableResult
    package static func syncfs(_ fd: Int32) -> Int32 {
        guard let trace else { return mirror_syncfs(fd) }
        return trace.onFile(.syncfs, fd) { mirror_syncfs(fd) }
    }

    /// `sync_file_range(2)` with `SYNC_FILE_RANGE_WRITE`: starts write-back, promises nothing.
    @inlinable @discardableResult
    package static func startWriteback(_ fd: Int32, _ offset: Int64, _ length: Int64) -> Int32 {
        guard let trace else { return mirror_start_writeback(fd, offset, length) }
        return trace.onFile(.writeback, fd, offset: offset, length: length) { mirror_start_writeback(fd, offset, length) }
    }
}
