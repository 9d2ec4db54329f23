#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// A port on 127.0.0.1 where a TCP connect never completes, as behind a firewall that drops SYNs.
///
/// A listener with backlog 0 that never calls `accept(2)`, whose accept queue is then filled by
/// connections of its own: Linux drops the SYNs of a listener whose accept queue is full
/// (`tcp_conn_request`, syncookies or not), so a client's connect hangs until its connect
/// timeout. A closed port would refuse at once instead. ``init()`` checks that a further connect
/// really hangs, so a test never passes on a listener that answered.
///
/// Owns the listening socket and the fillers; `deinit` closes them.
public final class UnansweredListener {
    public let port: Int
    private let listener: Int32
    private var fillers: [Int32] = []

    public init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw HarnessError.posix("socket") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 0) == 0 else {
            close(listener)
            throw HarnessError.posix("bind and listen on 127.0.0.1:0")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        guard named == 0 else {
            close(listener)
            throw HarnessError.posix("getsockname")
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        // Backlog 0 still queues one connection (and a SYN in flight may take another): a few
        // fillers leave the queue full whatever the kernel's arithmetic.
        for _ in 0..<4 { if let fd = startConnect() { fillers.append(fd) } }
        try Wait.until("the accept queue of 127.0.0.1:\(port) is full", timeout: 5) { Loopback.acceptQueueIsFull(port: port) }
        guard let probe = startConnect() else { throw HarnessError("UnansweredListener: probe connect failed at once") }
        defer { close(probe) }
        var pfd = pollfd(fd: probe, events: Int16(POLLOUT), revents: 0)
        if poll(&pfd, 1, 500) != 0 {
            throw HarnessError("UnansweredListener: a connect to 127.0.0.1:\(port) completed or failed; this kernel does not drop SYNs to a full accept queue")
        }
    }

    deinit {
        for fd in fillers { close(fd) }
        close(listener)
    }

    /// A non-blocking connect to the listener, left in progress; nil when it failed at once.
    private func startConnect() -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let r = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if r != 0 && errno != EINPROGRESS {
            close(fd)
            return nil
        }
        return fd
    }
}
