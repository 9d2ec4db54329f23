#if canImport(Glibc)
import Glibc
#endif

/// The process's file mode creation mask, read once without changing it.
///
/// Files that must have an exact mode whatever the umask (partial files: 0600) get an `fchmod`
/// after `open(O_CREAT)`. Under the usual umask (022, 077) the mode asked for is already the mode
/// created, and that `fchmod` is one system call and one inode update per file for nothing, which
/// adds up over thousands of small files. `umask(2)` cannot be read without setting it, which
/// would race with other threads creating files, so the mask comes from `/proc/self/status`
/// (`Umask:`, Linux 4.7). When it cannot be read, every mode counts as narrowed: the `fchmod` is
/// kept. mirror never changes its umask, so the value read at the first use stays true.
package enum ProcessUmask {
    static let value: mode_t? = read()

    /// Whether creating a file with `mode` may give it fewer permission bits (true when unknown).
    package static func narrows(_ mode: mode_t) -> Bool {
        guard let value else { return true }
        return mode & value != 0
    }

    private static func read() -> mode_t? {
        let fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)
        if fd < 0 { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 16 {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        return parse(String(decoding: bytes, as: UTF8.self))
    }

    /// The octal value of the `Umask:` line of a `/proc/PID/status` text, or nil.
    static func parse(_ status: String) -> mode_t? {
        for line in status.split(separator: "\n") where line.hasPrefix("Umask:") {
            let digits = line.dropFirst("Umask:".count).filter { $0 != " " && $0 != "\t" }
            return mode_t(digits, radix: 8).flatMap { $0 <= 0o777 ? $0 : nil }
        }
        return nil
    }
}
