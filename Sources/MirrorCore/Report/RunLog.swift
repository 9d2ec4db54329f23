#if canImport(Glibc)
import Glibc
#endif

/// `--log-file PATH`: one timestamped line per event of a run, appended, for the administrator who
/// wants a history without cron mail.
///
/// Each line is `2026-11-22T03:04:05Z LEVEL message` (RFC 3339, UTC). The file is opened with
/// `O_APPEND` (created with mode 0644, whatever the umask, when missing), so runs and other writers never overwrite each other,
/// and every line is written with one `write(2)`, which `O_APPEND` makes land whole at the end.
/// Every message goes through ``redactingURLs(in:)``: no credential reaches the log.
public final class RunLog {
    private let file: FileDescriptor
    /// Set after the first failed write, so a full disk costs one error message, not thousands.
    private var broken = false
    private let clock: () -> Double

    public init(path: String, clock: @escaping () -> Double = currentUnixTime) throws {
        let flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY
        var fd = open(path, flags | O_CREAT | O_EXCL, 0o644)
        if fd >= 0 {
            _ = fchmod(fd, 0o644)  // created now: readable by log readers whatever the umask
        } else if errno == EEXIST {
            fd = open(path, flags)
        }
        guard fd >= 0 else { throw SystemError("open the log file", path) }
        file = FileDescriptor(fd: fd, displayPath: path)
        self.clock = clock
    }

    /// The line as written (without its newline): timestamp, level, message with URLs masked and
    /// line breaks flattened so that one event is always one line.
    public static func line(time: Double, level: String, _ message: String) -> String {
        let flat = redactingURLs(in: message).map { $0 == "\n" || $0 == "\r" ? " " : String($0) }.joined()
        return "\(Formatting.rfc3339(time)) \(level) \(flat)"
    }

    /// Appends one line. Returns the error of a failed write, once.
    @discardableResult
    public func write(_ level: String, _ message: String) -> SystemError? {
        guard !broken else { return nil }
        let bytes = Array((RunLog.line(time: clock(), level: level, message) + "\n").utf8)
        let written = bytes.withUnsafeBytes { buffer in
            retryingOnEINTR { Glibc.write(file.fd, buffer.baseAddress, buffer.count) }
        }
        guard written == bytes.count else {
            broken = true
            return SystemError("append to", file.displayPath, code: written < 0 ? errno : EIO)
        }
        return nil
    }

    public func close() { file.close() }
}
