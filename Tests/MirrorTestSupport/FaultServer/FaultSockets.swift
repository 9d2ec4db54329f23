#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Socket plumbing shared by ``FaultServer`` and ``RawHTTPClient``.
///
/// Only loopback addresses are accepted (127.0.0.0/8 and ::1): the project rule is that tests never
/// send traffic off the machine, and refusing anything else here makes that rule impossible to break
/// by a typo in a test.
enum FaultSockets {
    /// A numeric loopback address with a port, ready for `bind`/`connect`.
    struct Address {
        var storage = sockaddr_storage()
        var length: socklen_t = 0
        var family: Int32 = AF_INET

        /// Calls `body` with the address as a `sockaddr` pointer.
        func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
            var copy = storage
            return withUnsafePointer(to: &copy) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
            }
        }
    }

    /// Parses a numeric IPv4 or IPv6 loopback address. Names such as `localhost` are refused on
    /// purpose: resolving them could yield a non-loopback address or a different family than the
    /// test expects.
    static func loopbackAddress(_ host: String, port: Int) throws -> Address {
        guard (0...65535).contains(port) else { throw HarnessError("invalid port \(port)") }
        var address = Address()
        if host.contains(":") {
            var v6 = sockaddr_in6()
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = in_port_t(UInt16(port)).bigEndian
            guard inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 else {
                throw HarnessError("not a numeric IPv6 address: \(host)")
            }
            let bytes = withUnsafeBytes(of: v6.sin6_addr) { Array($0) }
            guard bytes == [UInt8](repeating: 0, count: 15) + [1] else {
                throw HarnessError("refusing non-loopback address \(host): tests only use 127.0.0.0/8 and ::1")
            }
            withUnsafeMutableBytes(of: &address.storage) { dst in
                withUnsafeBytes(of: v6) { src in
                    UnsafeMutableRawBufferPointer(rebasing: dst[0..<src.count]).copyMemory(from: src)
                }
            }
            address.length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            address.family = AF_INET6
        } else {
            var v4 = sockaddr_in()
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = in_port_t(UInt16(port)).bigEndian
            guard inet_pton(AF_INET, host, &v4.sin_addr) == 1 else {
                throw HarnessError("not a numeric IPv4 address: \(host)")
            }
            let first = withUnsafeBytes(of: v4.sin_addr) { $0.first ?? 0 }
            guard first == 127 else {
                throw HarnessError("refusing non-loopback address \(host): tests only use 127.0.0.0/8 and ::1")
            }
            withUnsafeMutableBytes(of: &address.storage) { dst in
                withUnsafeBytes(of: v4) { src in
                    UnsafeMutableRawBufferPointer(rebasing: dst[0..<src.count]).copyMemory(from: src)
                }
            }
            address.length = socklen_t(MemoryLayout<sockaddr_in>.size)
            address.family = AF_INET
        }
        return address
    }

    /// The local port a socket is bound to (getsockname), so the server can bind port 0 and learn
    /// the port the kernel chose: no window in which another process could take it.
    static func localPort(_ fd: Int32) throws -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard rc == 0 else { throw HarnessError.posix("getsockname") }
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafeBytes(of: storage) { Int(UInt16(bigEndian: $0.load(as: sockaddr_in.self).sin_port)) }
        case AF_INET6:
            return withUnsafeBytes(of: storage) { Int(UInt16(bigEndian: $0.load(as: sockaddr_in6.self).sin6_port)) }
        default:
            throw HarnessError("getsockname: unexpected address family \(storage.ss_family)")
        }
    }

    /// A new TCP socket, close-on-exec so that a child process (nginx, `mirror`) cannot inherit it
    /// and keep a connection alive behind the test's back.
    static func tcpSocket(family: Int32) throws -> Int32 {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError.posix("socket(\(family == AF_INET6 ? "AF_INET6" : "AF_INET"))") }
        return fd
    }

    /// Sets a send or receive timeout. Every socket gets `SO_SNDTIMEO` so that a send to a peer
    /// that stopped reading fails after `seconds` instead of blocking forever.
    @discardableResult
    static func setTimeout(_ fd: Int32, _ option: Int32, seconds: Double) -> Bool {
        var limit = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1e6))
        if limit.tv_sec == 0 && limit.tv_usec == 0 { limit.tv_usec = 1000 }
        return setsockopt(fd, SOL_SOCKET, option, &limit, socklen_t(MemoryLayout<timeval>.size)) == 0
    }

    /// `close(2)`, callable from types that have a `close()` method of their own.
    static func closeDescriptor(_ fd: Int32) {
        close(fd)
    }

    static func setFlag(_ fd: Int32, level: Int32, _ option: Int32, _ value: Int32 = 1) {
        var on = value
        setsockopt(fd, level, option, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Sends all of `bytes` (retrying partial sends and EINTR) without SIGPIPE. Returns how many
    /// bytes the kernel accepted; fewer than `bytes.count` means the connection failed (peer gone,
    /// shut down by `stop()`, or `SO_SNDTIMEO` expired).
    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Int {
        sendAll(fd, bytes[...])
    }

    /// The same for part of an array (``LinkProxy`` passes on what a fault allows of a chunk).
    static func sendAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Int {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return send(fd, base + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                return sent
            }
            if n == 0 { return sent }
            sent += n
        }
        return sent
    }

    /// Waits up to `milliseconds` for `fd` to become readable (or hung up). Returns the `revents`,
    /// 0 on timeout, or -1 on error.
    static func pollReadable(_ fd: Int32, milliseconds: Int32) -> Int32 {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let rc = poll(&entry, 1, milliseconds)
            if rc < 0 {
                if errno == EINTR { continue }
                return -1
            }
            return rc == 0 ? 0 : Int32(entry.revents)
        }
    }
}
