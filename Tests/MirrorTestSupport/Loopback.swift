#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MirrorKit

/// Minimal networking on 127.0.0.1 for the harness itself: picking a free port and checking that a
/// test server answers.
///
/// Deliberately not libcurl or URLSession: the harness must be able to check the server
/// independently of the HTTP stack under test, and a raw HTTP/1.0 exchange (one request, response
/// until the server closes) has no connection reuse, proxy settings or decoding to get in the way.
/// Every socket call is bounded by `SO_RCVTIMEO`/`SO_SNDTIMEO` and an overall deadline.
public enum Loopback {
    /// Sends `GET path HTTP/1.0` to 127.0.0.1:`port` and reads the response until the server closes.
    /// Header names in the result are lowercased (HTTP names are case-insensitive); repeated
    /// headers are joined with ", ".
    public static func httpGet(port: Int, path: String, headers: [String: String] = [:], timeout: Double = 10)
        throws -> (status: Int, headers: [String: String], body: [UInt8])
    {
        let deadline = monotonicSeconds() + timeout
        let fd = try connectedSocket(port: port, timeout: timeout)
        defer { close(fd) }

        var request = "GET \(path) HTTP/1.0\r\n"
        if !headers.keys.contains(where: { $0.lowercased() == "host" }) { request += "Host: 127.0.0.1:\(port)\r\n" }
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { request += "\(name): \(value)\r\n" }
        request += "\r\n"
        let requestBytes = Array(request.utf8)
        var sent = 0
        while sent < requestBytes.count {
            let n = requestBytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return send(fd, base + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw HarnessError.posix("send to 127.0.0.1:\(port)")
            }
            sent += n
        }

        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            guard monotonicSeconds() < deadline else {
                throw HarnessError("GET \(path) on 127.0.0.1:\(port): no complete response within \(timeout) s (got \(response.count) bytes)")
            }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    throw HarnessError("GET \(path) on 127.0.0.1:\(port): receive timed out after \(timeout) s (got \(response.count) bytes)")
                }
                throw HarnessError.posix("recv from 127.0.0.1:\(port)")
            }
            response.append(contentsOf: buffer[0..<n])
        }
        return try parse(response, what: "GET \(path) on 127.0.0.1:\(port)")
    }

    /// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read back, closed).
    /// Someone else may take it before it is used, so callers must cope with "address in use"; it
    /// is also a convenient port to expect "connection refused" from.
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError.posix("socket") }
        defer { close(fd) }
        var address = loopbackAddress(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw HarnessError.posix("bind 127.0.0.1:0") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw HarnessError.posix("getsockname") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// True when a TCP connection to 127.0.0.1:`port` is accepted right now.
    public static func canConnect(port: Int) -> Bool {
        guard let fd = try? connectedSocket(port: port, timeout: 1) else { return false }
        close(fd)
        return true
    }

    /// One IPv4 TCP socket of this network namespace, as `/proc/net/tcp` lists it.
    public struct SocketEntry: Sendable, Equatable {
        public var localPort: Int
        public var remotePort: Int
        /// The kernel's TCP state: 1 established, 10 listening (`include/net/tcp_states.h`).
        public var state: Int
        /// For a listening socket: the connections in its accept queue, and the queue's limit
        /// (`sk_ack_backlog`, `sk_max_ack_backlog`); otherwise the bytes queued.
        public var rxQueue: Int
        public var txQueue: Int
    }

    /// The IPv4 TCP sockets of this network namespace (`/proc/net/tcp`).
    public static func sockets() -> [SocketEntry] {
        guard let text = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").dropFirst().compactMap { line in
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            guard f.count > 4, let local = f[1].split(separator: ":").last, let remote = f[2].split(separator: ":").last,
                  let localPort = Int(local, radix: 16), let remotePort = Int(remote, radix: 16), let state = Int(f[3], radix: 16)
            else { return nil }
            let queues = f[4].split(separator: ":")
            guard queues.count == 2, let tx = Int(queues[0], radix: 16), let rx = Int(queues[1], radix: 16) else { return nil }
            return SocketEntry(localPort: localPort, remotePort: remotePort, state: state, rxQueue: rx, txQueue: tx)
        }
    }

    /// How many established TCP connections have `port` at either end (both ends of a loopback
    /// connection are listed).
    public static func establishedConnections(port: Int) -> Int {
        sockets().filter { $0.state == 1 && ($0.localPort == port || $0.remotePort == port) }.count
    }

    /// Whether the accept queue of the listener on `port` is full (`sk_acceptq_is_full`: more
    /// queued than the backlog), so that the kernel drops further SYNs to it.
    public static func acceptQueueIsFull(port: Int) -> Bool {
        sockets().contains { $0.state == 10 && $0.localPort == port && $0.rxQueue > $0.txQueue }
    }

    static func connectedSocket(port: Int, timeout: Double) throws -> Int32 {
        guard (1...65535).contains(port) else { throw HarnessError("invalid port \(port)") }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError.posix("socket") }
        var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1e6))
        if limit.tv_sec == 0 && limit.tv_usec == 0 { limit.tv_usec = 1000 }
        // SO_SNDTIMEO also bounds a blocking connect() on Linux.
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = loopbackAddress(port: port)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            let error = HarnessError.posix("connect to 127.0.0.1:\(port)")
            close(fd)
            throw error
        }
        return fd
    }

    static func loopbackAddress(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        return address
    }

    private static func parse(_ response: [UInt8], what: String) throws -> (status: Int, headers: [String: String], body: [UInt8]) {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let headerEnd = response.indices.first(where: { response[$0...].starts(with: separator) }) else {
            throw HarnessError("\(what): response has no end of headers (\(response.count) bytes)")
        }
        let head = String(decoding: response[0..<headerEnd], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
            throw HarnessError("\(what): bad status line \(statusLine.debugDescription)")
        }
        var headers: [String: String] = [:]
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else {
                throw HarnessError("\(what): bad header line \(line.debugDescription)")
            }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
        return (status, headers, Array(response[(headerEnd + 4)...]))
    }
}
