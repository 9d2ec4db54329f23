import CLinux
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// The record of every ``DiskChange`` call, for the crash-state tests: `MIRROR_TEST_TRACE=FILE`
/// appends one record per call to FILE, with what is needed to replay it on a model of the file
/// system (docs/journal.md, "Power loss, as the tests model it").
///
/// A record is one line, `KIND key=value ...`, values percent-encoded as the journal's are
/// (docs/journal.md, "File format"); a `write` line is followed by exactly `len` raw bytes and a
/// newline. Paths are absolute, as the kernel names a descriptor (`readlink` of
/// `/proc/self/fd/N`) joined to the name the call was given; files written through a descriptor
/// are named by their inode (`fstat`), since a file may be renamed, or have no name, while it is
/// written. Each call is made and recorded under one lock, so the trace is in the order the
/// calls took effect; the test pays for that, a normal run never takes the lock.
///
/// Sendable, unchecked: the descriptor is set in `init` and only written under ``lock``.
package final class DiskTrace: @unchecked Sendable {
    package enum Kind: String, Sendable {
        case open, mkdir, symlink, unlink, rmdir, rename, exchange, link, write, truncate, allocate, reserve, chmod, times,
             fsync, fdatasync, syncfs, writeback
    }

    @usableFromInline let lock = Lock()
    private let fd: Int32

    private init(fd: Int32) { self.fd = fd }

    /// The recorder `MIRROR_TEST_TRACE` asks for, or nil. A trace file that cannot be opened is
    /// a broken test, not a run to go on with unrecorded: the process says so and exits 70.
    static func fromEnvironment() -> DiskTrace? {
        guard let raw = getenv("MIRROR_TEST_TRACE") else { return nil }
        let fd = Glibc.open(raw, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            fputs("mirror: cannot open MIRROR_TEST_TRACE \(String(cString: raw)): \(String(cString: strerror(errno)))\n", mirror_stderr())
            exit(70)
        }
        return DiskTrace(fd: fd)
    }

    // MARK: - Recording, one kind of call each

    package func opening(flags: Int32, _ body: () -> Int32) -> Int32 {
        let tmpfile: Int32 = O_DIRECTORY | 0o20000000
        let writes = flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC) != 0 || flags & tmpfile == tmpfile
        guard writes else { return body() }
        return lock.withLock {
            let result = body()
            guard result >= 0 else { return result }
            let code = errno
            defer { errno = code }
            var st = stat()
            guard fstat(result, &st) == 0 else { return result }
            if flags & tmpfile == tmpfile {
                emit(.open, [("ino", text(st.st_ino)), ("mode", text(st.st_mode & 0o7777)), ("tmpfile", text(1))])
            } else {
                emit(.open, [("path", path(of: result)), ("ino", text(st.st_ino)), ("mode", text(st.st_mode & 0o7777)),
                             ("trunc", text(flags & O_TRUNC != 0 ? 1 : 0))])
            }
            return result
        }
    }

    package func named(_ kind: Kind, _ dirfd: Int32, _ name: UnsafePointer<CChar>, mode: mode_t = 0,
                       target: UnsafePointer<CChar>? = nil, _ body: () -> Int32) -> Int32 {
        lock.withLock {
            let where_ = path(dirfd, name)
            return recording(body) {
                var fields = [("path", where_)]
                if kind == .mkdir { fields.append(("mode", text(mode & 0o7777))) }
                if let target { fields.append(("target", bytes(target))) }
                emit(kind, fields)
            }
        }
    }

    package func pair(_ kind: Kind, _ olddirfd: Int32, _ oldpath: UnsafePointer<CChar>, _ newdirfd: Int32,
                      _ newpath: UnsafePointer<CChar>, _ body: () -> Int32) -> Int32 {
        lock.withLock {
            let from = path(olddirfd, oldpath)
            let to = path(newdirfd, newpath)
            return recording(body) { emit(kind, [("from", from), ("to", to)]) }
        }
    }

    package func linkOpen(_ fd: Int32, _ newdirfd: Int32, _ newpath: UnsafePointer<CChar>, _ body: () -> Int32) -> Int32 {
        lock.withLock {
            let to = path(newdirfd, newpath)
            return recording(body) { emit(.link, [("ino", inode(fd)), ("to", to)]) }
        }
    }

    package func onFile(_ kind: Kind, _ fd: Int32, offset: Int64? = nil, length: Int64? = nil, _ body: () -> Int32) -> Int32 {
        lock.withLock {
            recording(body) {
                var fields = [("ino", inode(fd))]
                if kind == .syncfs { fields.append(("path", path(of: fd))) }
                if let offset { fields.append(("off", text(offset))) }
                if let length { fields.append((kind == .chmod ? "mode" : "len", text(length))) }
                emit(kind, fields)
            }
        }
    }

    package func pwrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int, _ offset: off_t) -> Int {
        lock.withLock {
            let n = Glibc.pwrite(fd, buffer, count, offset)
            guard n > 0 else { return n }
            let code = errno
            defer { errno = code }
            emitWrite(fd, offset: Int64(offset), UnsafeRawBufferPointer(start: buffer, count: n))
            return n
        }
    }

    package func write(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
        lock.withLock {
            let n = Glibc.write(fd, buffer, count)
            guard n > 0 else { return n }
            let code = errno
            defer { errno = code }
            // After the write the position is its end (O_APPEND moved it to the old end first).
            let end = Int64(lseek(fd, 0, SEEK_CUR))
            emitWrite(fd, offset: end - Int64(n), UnsafeRawBufferPointer(start: buffer, count: n))
            return n
        }
    }

    package func copyFileRange(_ infd: Int32, _ inoff: UnsafeMutablePointer<Int64>, _ outfd: Int32,
                               _ outoff: UnsafeMutablePointer<Int64>, _ length: UInt) -> Int64 {
        lock.withLock {
            let start = outoff.pointee
            let n = mirror_copy_file_range(infd, inoff, outfd, outoff, length)
            guard n > 0 else { return n }
            let code = errno
            defer { errno = code }
            emitReadBack(outfd, from: start, count: Int(n))
            return n
        }
    }

    package func clone(_ fd: Int32, _ body: () -> Int32) -> Int32 {
        lock.withLock {
            recording(body) {
                var st = stat()
                if fstat(fd, &st) == 0 { emitReadBack(fd, from: 0, count: Int(st.st_size)) }
            }
        }
    }

    /// Makes the call (under the caller's hold of ``lock``) and, when it returned 0, records it
    /// with `record`, `errno` left as the call set it: the trace holds what took effect, in order.
    private func recording(_ body: () -> Int32, _ record: () -> Void) -> Int32 {
        let result = body()
        guard result == 0 else { return result }
        let code = errno
        defer { errno = code }
        record()
        return result
    }

    // MARK: - Writing records

    private func emitReadBack(_ fd: Int32, from offset: Int64, count: Int) {
        var bytes = [UInt8](repeating: 0, count: count)
        let got = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
        bytes.withUnsafeBytes { emitWrite(fd, offset: offset, UnsafeRawBufferPointer(rebasing: $0[0..<max(0, got)])) }
    }

    private func emitWrite(_ fd: Int32, offset: Int64, _ bytes: UnsafeRawBufferPointer) {
        emit(.write, [("ino", inode(fd)), ("off", text(offset)), ("len", text(bytes.count))], payload: bytes)
    }

    private func emit(_ kind: Kind, _ fields: [(String, [UInt8])], payload: UnsafeRawBufferPointer? = nil) {
        var line = Array(kind.rawValue.utf8)
        for (key, value) in fields {
            line.append(UInt8(ascii: " "))
            line.append(contentsOf: key.utf8)
            line.append(UInt8(ascii: "="))
            Self.encode(value, into: &line)
        }
        line.append(UInt8(ascii: "\n"))
        if let payload {
            line.append(contentsOf: payload)
            line.append(UInt8(ascii: "\n"))
        }
        line.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            var done = 0
            while done < raw.count {
                let n = Glibc.write(fd, base + done, raw.count - done)
                if n <= 0 && errno != EINTR { break }
                if n > 0 { done += n }
            }
        }
    }

    /// Percent-encoding as the journal's (docs/journal.md, "File format"), of a value's bytes.
    static func encode(_ value: [UInt8], into out: inout [UInt8]) {
        let hex = Array("0123456789ABCDEF".utf8)
        for b in value {
            if b < 0x21 || b == 0x7F || b == UInt8(ascii: "%") || b == UInt8(ascii: "=") {
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 15)])
            } else {
                out.append(b)
            }
        }
    }

    // MARK: - Naming

    private func text<N: BinaryInteger>(_ n: N) -> [UInt8] { Array("\(n)".utf8) }

    /// A C string's bytes, as they are (paths are bytes, not text).
    private func bytes(_ string: UnsafePointer<CChar>) -> [UInt8] {
        Array(UnsafeBufferPointer(start: string, count: strlen(string))).map { UInt8(bitPattern: $0) }
    }

    private func inode(_ fd: Int32) -> [UInt8] {
        var st = stat()
        return fstat(fd, &st) == 0 ? text(st.st_ino) : Array("?".utf8)
    }

    /// What the kernel calls the open descriptor (`readlink` of `/proc/self/fd/N`); the current
    /// folder for `AT_FDCWD`.
    private func path(of fd: Int32) -> [UInt8] {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        if fd == AT_FDCWD {
            return getcwd(&buffer, buffer.count) != nil ? bytes(buffer) : Array("?".utf8)
        }
        let n = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
        guard n > 0 else { return Array("?".utf8) }
        buffer[n] = 0
        return bytes(buffer)
    }

    private func path(_ dirfd: Int32, _ name: UnsafePointer<CChar>) -> [UInt8] {
        let name = bytes(name)
        if name.first == UInt8(ascii: "/") { return name }
        return path(of: dirfd) + [UInt8(ascii: "/")] + name
    }
}
