#if canImport(Glibc)
import Glibc
#endif

/// The exclusive lock on a destination: `flock(2)` on `DEST/.mirror/lock`.
///
/// `flock` locks belong to the open file description, so the kernel releases it when the process
/// dies, however it dies (SIGKILL, power cut): a stale lock can never block the next cron run.
/// The file holds the holder's pid, only so that the refusal can name it.
public final class DestinationLock {
    public enum Failure: Error, CustomStringConvertible {
        case held(destination: String, pid: String?)

        public var description: String {
            switch self {
            case .held(let destination, let pid):
                let by = pid.map { " (pid \($0))" } ?? ""
                return "\(destination) is being synced by another mirror run\(by); try again later, or pass --wait"
            }
        }
    }

    private let file: FileDescriptor

    /// Takes the lock, or throws ``Failure/held(destination:pid:)`` at once (unless `wait`).
    public init(stateFolder: FileDescriptor, destination: String, wait: Bool) throws {
        let fd = openat(stateFolder.fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
        if fd < 0 { throw SystemError("create lock file in", destination + "/.mirror") }
        file = FileDescriptor(fd: fd, displayPath: destination + "/.mirror/lock")
        // It is truncated and written below: it must not be a hard link to some other file.
        try SafePath.requireSoleRegularFile(fd, destination + "/.mirror/lock")
        if retryingOnEINTR({ flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) }) != 0 {
            if errno == EWOULDBLOCK {
                let holder = (try? file.readAll()).map { String(decoding: $0, as: UTF8.self).trimmingSpaces }
                throw Failure.held(destination: destination, pid: holder?.isEmpty == false ? holder : nil)
            }
            throw SystemError("lock", destination + "/.mirror/lock")
        }
        try file.truncate(to: 0)
        let pid = Array("\(getpid())\n".utf8)
        try pid.withUnsafeBytes { try file.write($0, at: 0) }
    }

    /// Releases the lock (closing the descriptor releases the `flock`).
    public func release() { file.close() }
}
