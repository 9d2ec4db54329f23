import MirrorFS
import MirrorKit
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
///
/// The path often lies in a folder others can write (`/tmp`, a shared log folder), and `mirror`
/// often runs as root, so what sits at the name is not trusted (SECURITY.md): see ``init(path:clock:)``.
public final class RunLog {
    private let file: FileDescriptor
    /// Set after the first failed write, so a full disk costs one error message, not thousands.
    private var broken = false
    private let clock: () -> Double

    /// Opens (or creates) the log without following what another user may have planted at `path`:
    /// - `O_NOFOLLOW`: a symbolic link at the name is refused (`ELOOP`), never followed to the file
    ///   it names (`/etc/passwd`, say). Folders above the name may still be links.
    /// - `O_NONBLOCK`: a FIFO with no reader fails at once (`ENXIO`, open(2)) instead of blocking
    ///   the run before it takes its lock, where even SIGTERM could not end it.
    /// - `fstat(2)` on the open descriptor: anything but a regular file (a FIFO with a reader, a
    ///   device, a folder) is refused, and so is a file with other names (`st_nlink > 1`): a hard
    ///   link planted beside the log would make each line land in the file it names.
    /// - then `fcntl(F_SETFL)` clears `O_NONBLOCK`, so writes to the regular file behave as always.
    public init(path: String, clock: @escaping () -> Double = currentUnixTime) throws {
        let flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK
        var created = true
        var fd = open(path, flags | O_CREAT | O_EXCL, 0o644)
        if fd < 0 && errno == EEXIST {
            created = false
            fd = open(path, flags)
        }
        guard fd >= 0 else {
            switch errno {
            case ELOOP: throw LogFileRefusal.symbolicLink(path: path)
            case ENXIO: throw LogFileRefusal.notARegularFile(path: path, kind: "a FIFO or socket")
            default: throw SystemError("open the log file", path)
            }
        }
        let opened = FileDescriptor(fd: fd, displayPath: path)
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw SystemError("inspect the log file", path) }
        let status = FileStatus(st)
        guard status.isRegularFile else {
            throw LogFileRefusal.notARegularFile(path: path, kind: LogFileRefusal.kind(of: st.st_mode))
        }
        guard st.st_nlink <= 1 else { throw LogFileRefusal.otherNames(path: path, links: Int(st.st_nlink)) }
        let mode = fcntl(fd, F_GETFL)
        guard mode >= 0, fcntl(fd, F_SETFL, mode & ~O_NONBLOCK) == 0 else { throw SystemError("open the log file", path) }
        if created { _ = fchmod(fd, 0o644) }  // created now: readable by log readers whatever the umask
        file = opened
        self.clock = clock
    }

    /// The line as written (without its newline): timestamp, level, message with line breaks
    /// flattened so that one event is always one line, then URLs masked and other controls escaped
    /// (``Formatting/forPeople(_:)``): the log is read with `less` and `tail -f` on a terminal.
    public static func line(time: Double, level: String, _ message: String) -> String {
        let flat = Formatting.forPeople(message.map { $0 == "\n" || $0 == "\r" || $0 == "\r\n" ? " " : String($0) }.joined())
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

/// Why `--log-file` names something `mirror` will not append to; see ``RunLog/init(path:clock:)``.
public enum LogFileRefusal: Error, CustomStringConvertible, Equatable, Sendable {
    case symbolicLink(path: String)
    case notARegularFile(path: String, kind: String)
    case otherNames(path: String, links: Int)

    public var description: String {
        switch self {
        case .symbolicLink(let path):
            return "cannot use the log file \(path): it is a symbolic link, which mirror does not follow "
                + "(anyone who can write in its folder could have planted it); give the log file's own path"
        case .notARegularFile(let path, let kind):
            return "cannot use the log file \(path): it is \(kind), not a regular file; remove it or choose another path"
        case .otherNames(let path, let links):
            return "cannot use the log file \(path): it has \(links) names (hard links), so lines appended "
                + "to it would land in a file elsewhere; remove it or choose another path"
        }
    }

    static func kind(of mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: return "a FIFO"
        case S_IFDIR: return "a folder"
        case S_IFCHR, S_IFBLK: return "a device"
        case S_IFSOCK: return "a socket"
        default: return "something other than a file"
        }
    }
}
