#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Small files read whole: manifests, signatures, keys, `.netrc`, and the /proc and /sys files
/// ``CPUQuota`` reads. It lives with the threads and the clock because it needs nothing but
/// POSIX, so every layer above can use it.
package enum WholeFile {
    /// Why the file could not be read: the `errno` of the call that failed (`EFBIG` when it is
    /// longer than the limit).
    package struct Failure: Error { package var errno: Int32 }

    /// The whole file, with POSIX `open`/`fstat`/`read` (retrying on EINTR). Reading it at once is
    /// fine: libyaml wants the bytes in memory anyway and manifests are megabytes, not gigabytes.
    /// A file longer than `limit` bytes fails with `EFBIG` (keys and signatures are tiny).
    package static func read(_ path: String, limit: Int = Int.max) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(errno: errno) }
        defer { close(fd) }
        var info = stat()
        var bytes: [UInt8] = []
        // Room for the whole file plus the probe that meets end-of-file, so a file read at once
        // is never copied into a doubled buffer (a 100,000-entry manifest is 12 MB).
        let chunk = 1 << 20
        var want = min(chunk, limit == Int.max ? chunk : limit + 1)
        if fstat(fd, &info) == 0, info.st_size > 0 {
            if Int64(info.st_size) > Int64(limit) { throw Failure(errno: EFBIG) }
            if info.st_size < Int(Int32.max) { want = Int(info.st_size) + 4096 }
        }
        bytes = [UInt8](repeating: 0, count: want)
        var filled = 0
        while true {
            if bytes.count == filled { bytes.append(contentsOf: repeatElement(0, count: max(chunk, bytes.count))) }
            let n = bytes.withUnsafeMutableBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }  // never: the buffer is never empty
                return Glibc.read(fd, base + filled, buffer.count - filled)
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(errno: errno)
            }
            if n == 0 { break }
            filled += n
            if filled > limit { throw Failure(errno: EFBIG) }
        }
        bytes.removeSubrange(filled...)
        return bytes
    }
}
