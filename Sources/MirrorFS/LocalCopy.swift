import CLinux
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// Copies a file already on this machine into a new partial file, for reuse by content
/// (docs/cli.md, "Reuse by content"): a clone (`ioctl(FICLONE)`, btrfs and XFS: no data is
/// copied, the blocks are shared copy-on-write), else `copy_file_range(2)` (the kernel copies,
/// server-side on NFS 4.2), else `read`/`write`. What was copied is then hashed and verified like a
/// download: the copy is trusted no more than the network.
package enum LocalCopy {
    /// How the bytes were copied, for the output.
    package enum Method: String { case clone, kernel = "copy_file_range", readWrite = "read/write" }

    /// `FICLONE` from <linux/fs.h>: `_IOW(0x94, 9, int)`.
    static let ficlone: UInt = 0x4004_9409

    /// Creates `name` in `folder` (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600, as a partial file
    /// is made) holding the `size` bytes of `source`. A file of that name is removed first.
    package static func copy(_ source: FileDescriptor, size: Int64, to name: String, in folder: FileDescriptor,
                     displayPath: String) throws -> Method {
        if DiskChange.unlinkat(folder.fd, name, 0) != 0 && errno != ENOENT { throw SystemError("remove the old partial file", displayPath) }
        let fd = SafePath.open(name, beneath: folder.fd, flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
        if fd < 0 { throw SystemError("create partial file", displayPath) }
        let target = FileDescriptor(fd: fd, displayPath: displayPath)
        defer { target.close() }
        _ = DiskChange.fchmod(fd, 0o600)
        do {
            if DiskChange.clone(fd, from: source.fd, request: ficlone) == 0 {
                let st = try target.stat()
                if st.size == size { return .clone }
                try target.truncate(to: 0)
            }
            if try kernelCopy(from: source, to: target, size: size) { return .kernel }
            try readWriteCopy(from: source, to: target, size: size)
            return .readWrite
        } catch {
            _ = DiskChange.unlinkat(folder.fd, name, 0)
            throw error
        }
    }

    /// `copy_file_range` until `size` bytes are in; false when the kernel or the file systems
    /// cannot (`EXDEV` before Linux 5.3, `ENOSYS`, `EOPNOTSUPP`, `EINVAL`) and nothing was copied.
    private static func kernelCopy(from source: FileDescriptor, to target: FileDescriptor, size: Int64) throws -> Bool {
        var inOffset: Int64 = 0
        var outOffset: Int64 = 0
        while inOffset < size {
            let n = DiskChange.copyFileRange(source.fd, &inOffset, target.fd, &outOffset, UInt(min(size - inOffset, 1 << 30)))
            if n < 0 {
                if errno == EINTR { continue }
                if inOffset == 0 && [EXDEV, ENOSYS, EOPNOTSUPP, EINVAL].contains(errno) { return false }
                throw SystemError("copy into", target.displayPath)
            }
            if n == 0 { throw SystemError("copy into", target.displayPath + " (the source ended early)", code: EIO) }
        }
        return true
    }

    /// Copies `length` bytes at `from` in `source` to `to` in `target` (a chunk delta's local
    /// part, `PartialFile.beginDelta(_:from:url:)`): `copy_file_range`, else `pread`/`pwrite`.
    /// `stop` is asked every 64 MiB (``StoppedEarly`` is thrown): one copy can be a whole file.
    package static func copyRange(from source: FileDescriptor, at from: Int64, to target: FileDescriptor, at to: Int64, length: Int64,
                          stop: () -> Bool = { false }) throws {
        var inOffset = from
        var outOffset = to
        let end = from + length
        var nextCheck = from
        while inOffset < end {
            if inOffset >= nextCheck {
                if stop() { throw StoppedEarly() }
                nextCheck = inOffset + (64 << 20)
            }
            let n = DiskChange.copyFileRange(source.fd, &inOffset, target.fd, &outOffset, UInt(min(end - inOffset, 64 << 20)))
            if n > 0 { continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && ![EXDEV, ENOSYS, EOPNOTSUPP, EINVAL].contains(errno) { throw SystemError("copy into", target.displayPath) }
            if n == 0 { throw SystemError("copy into", target.displayPath + " (the source ended early)", code: EIO) }
            // The kernel cannot copy between these files: read and write what is left.
            var buffer = [UInt8](repeating: 0, count: Int(min(end - inOffset, 1 << 20)))
            while inOffset < end {
                if inOffset >= nextCheck {
                    if stop() { throw StoppedEarly() }
                    nextCheck = inOffset + (64 << 20)
                }
                let want = Int(min(end - inOffset, Int64(buffer.count)))
                let got = try buffer.withUnsafeMutableBytes { try source.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]), at: inOffset) }
                if got == 0 { throw SystemError("copy into", target.displayPath + " (the source ended early)", code: EIO) }
                try buffer.withUnsafeBytes { try target.write(UnsafeRawBufferPointer(rebasing: $0[0..<got]), at: outOffset) }
                inOffset += Int64(got)
                outOffset += Int64(got)
            }
        }
    }

    private static func readWriteCopy(from source: FileDescriptor, to target: FileDescriptor, size: Int64) throws {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while offset < size {
            let n = try buffer.withUnsafeMutableBytes { try source.read(into: $0, at: offset) }
            if n == 0 { throw SystemError("copy into", target.displayPath + " (the source ended early)", code: EIO) }
            try buffer.withUnsafeBytes { try target.write(UnsafeRawBufferPointer(rebasing: $0[0..<n]), at: offset) }
            offset += Int64(n)
        }
    }
}
