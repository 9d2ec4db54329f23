#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MirrorKit

/// A response as read by ``RawHTTPClient``, with how its body ended.
public struct RawHTTPResponse: Sendable {
    public enum End: Equatable, Sendable {
        /// The body ended where its framing said (Content-Length reached, last chunk, or no body).
        case complete
        /// A close-delimited body (no Content-Length, not chunked) ended with the connection.
        case closeDelimited
        /// The connection closed (or failed) before the framing said the body ends.
        case closedEarly
        /// Nothing more arrived before the read timeout; the connection is still open.
        case timedOut
        /// The caller's `maxBody` was reached; the rest was not read.
        case limitReached
    }

    /// `HTTP/1.1` or `HTTP/1.0`, as in the status line.
    public var version: String
    public var status: Int
    public var reason: String
    /// Names lowercased; repeated fields joined with ", ".
    public var headers: [String: String]
    /// The body after removing chunked framing.
    public var body: [UInt8]
    public var end: End
    /// How many separate reads delivered body bytes (a trickled body arrives in many).
    public var bodyReads: Int
}

/// A raw HTTP/1.1 client for checking ``FaultServer`` itself, on any loopback address.
///
/// Why not `Loopback.httpGet`: that one speaks HTTP/1.0 and reads until the server closes, so it
/// cannot reuse a connection, notice that a connection stayed open (a stall, a truncated
/// keep-alive body), stop reading an endless body, or reach 127.0.0.2 and ::1. This client frames
/// bodies itself (Content-Length, chunked, close-delimited) and reports how each one ended instead
/// of guessing. Every read has a deadline; `SO_SNDTIMEO` bounds sends.
public final class RawHTTPClient {
    public let host: String
    public let port: Int
    /// Default deadline, in seconds, for one `readResponse` or `readUntilClose`.
    public var timeout: Double
    private var fd: Int32
    /// Bytes received but not yet consumed (the start of a next response).
    private var pending: [UInt8] = []
    private var sawEOF = false

    public init(host: String = "127.0.0.1", port: Int, timeout: Double = 5) throws {
        let address = try FaultSockets.loopbackAddress(host, port: port)
        let socketFD = try FaultSockets.tcpSocket(family: address.family)
        // SO_SNDTIMEO also bounds a blocking connect() on Linux.
        FaultSockets.setTimeout(socketFD, SO_SNDTIMEO, seconds: timeout)
        let rc = address.withSockaddr { connect(socketFD, $0, $1) }
        guard rc == 0 else {
            let error = HarnessError.posix("connect to \(host) port \(port)")
            FaultSockets.closeDescriptor(socketFD)
            throw error
        }
        self.host = host
        self.port = port
        self.timeout = timeout
        fd = socketFD
    }

    deinit { close() }

    /// Closes the connection (idempotent).
    public func close() {
        if fd >= 0 {
            FaultSockets.closeDescriptor(fd)
            fd = -1
        }
    }

    /// Sends raw bytes (for malformed requests).
    public func send(raw bytes: [UInt8]) throws {
        guard fd >= 0 else { throw HarnessError("RawHTTPClient: send on a closed connection") }
        let n = FaultSockets.sendAll(fd, bytes)
        guard n == bytes.count else { throw HarnessError.posix("send to \(host) port \(port) (\(n) of \(bytes.count) bytes)") }
    }

    /// Sends a request. A `Host` header is added unless `headers` has one.
    public func sendRequest(_ method: String = "GET", _ path: String, headers: [(String, String)] = [],
                            version: String = "HTTP/1.1") throws {
        var text = "\(method) \(path) \(version)\r\n"
        if !headers.contains(where: { $0.0.lowercased() == "host" }) {
            text += host.contains(":") ? "Host: [\(host)]:\(port)\r\n" : "Host: \(host):\(port)\r\n"
        }
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        try send(raw: Array(text.utf8))
    }

    /// Sends a request and reads its response.
    public func request(_ method: String = "GET", _ path: String, headers: [(String, String)] = [],
                        version: String = "HTTP/1.1", maxBody: Int = 64 << 20, timeout: Double? = nil) throws -> RawHTTPResponse {
        try sendRequest(method, path, headers: headers, version: version)
        return try readResponse(method: method, maxBody: maxBody, timeout: timeout)
    }

    /// Reads one response. Throws when no complete status line and headers arrive (connection
    /// closed or deadline passed); body problems are reported in ``RawHTTPResponse/end`` instead.
    ///
    /// - Parameter method: the request's method (a response to HEAD has no body).
    public func readResponse(method: String = "GET", maxBody: Int = 64 << 20, timeout: Double? = nil) throws -> RawHTTPResponse {
        let deadline = monotonicSeconds() + (timeout ?? self.timeout)
        var headEnd: (head: Int, body: Int)?
        while true {
            headEnd = FaultHTTP.headEnd(pending)
            if headEnd != nil { break }
            guard pending.count <= FaultHTTP.maxHeadBytes else {
                throw HarnessError("\(host) port \(port): response head larger than \(FaultHTTP.maxHeadBytes) bytes")
            }
            switch receive(deadline: deadline) {
            case .data: continue
            case .eof: throw HarnessError("\(host) port \(port): connection closed before a complete response head (\(pending.count) bytes: \(preview(pending)))")
            case .timeout: throw HarnessError("\(host) port \(port): no complete response head in time (\(pending.count) bytes: \(preview(pending)))")
            }
        }
        guard let bounds = headEnd else { throw HarnessError("unreachable") }
        // Split bytes, not a String: in Swift "\r\n" is one Character, so splitting text on "\n"
        // would not separate CRLF lines.
        var lines = pending[0..<bounds.head].split(separator: 10, omittingEmptySubsequences: false).map { line -> String in
            String(decoding: line.last == 13 ? line.dropLast() : line, as: UTF8.self)
        }
        pending.removeFirst(bounds.body)
        while let last = lines.last, last.isEmpty { lines.removeLast() }
        guard !lines.isEmpty else { throw HarnessError("\(host) port \(port): empty response head") }
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
            throw HarnessError("\(host) port \(port): bad status line \(statusLine.debugDescription)")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else {
                throw HarnessError("\(host) port \(port): bad header line \(line.debugDescription)")
            }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].faultTrimmed
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
        var response = RawHTTPResponse(version: String(parts[0]), status: status,
                                       reason: parts.count > 2 ? String(parts[2]) : "", headers: headers,
                                       body: [], end: .complete, bodyReads: 0)

        // RFC 9112 §6.3: which responses have a body, and how it is delimited.
        if method == "HEAD" || (100..<200).contains(status) || status == 204 || status == 304 { return response }
        if let coding = headers["transfer-encoding"], coding.lowercased().contains("chunked") {
            readChunked(into: &response, maxBody: maxBody, deadline: deadline)
        } else if let lengthText = headers["content-length"] {
            guard let length = Int(lengthText), length >= 0 else {
                throw HarnessError("\(host) port \(port): bad Content-Length \(lengthText.debugDescription)")
            }
            readCounted(into: &response, length: length, maxBody: maxBody, deadline: deadline)
        } else {
            readCounted(into: &response, length: nil, maxBody: maxBody, deadline: deadline)
        }
        return response
    }

    /// Reads and discards until the server closes the connection. Returns the number of bytes read
    /// and whether the connection closed before `timeout` (false: still open).
    public func readUntilClose(timeout: Double? = nil) -> (bytes: Int, closed: Bool) {
        let deadline = monotonicSeconds() + (timeout ?? self.timeout)
        var total = pending.count
        pending.removeAll()
        while true {
            switch receive(deadline: deadline) {
            case .data:
                total += pending.count
                pending.removeAll()
            case .eof: return (total, true)
            case .timeout: return (total, false)
            }
        }
    }

    // MARK: Private

    private enum Received { case data, eof, timeout }

    /// Appends whatever arrives before `deadline` to `pending`. A connection error (reset) counts
    /// as end of stream.
    private func receive(deadline: Double) -> Received {
        if sawEOF || fd < 0 { return .eof }
        var scratch = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let remaining = deadline - monotonicSeconds()
            if remaining <= 0 { return .timeout }
            let events = FaultSockets.pollReadable(fd, milliseconds: Int32(min(remaining, 1) * 1000) + 1)
            if events < 0 { return .eof }
            if events == 0 { continue }
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                pending.append(contentsOf: scratch[0..<n])
                return .data
            }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            sawEOF = true
            return .eof
        }
    }

    /// Reads `length` body bytes, or (nil) until the connection closes.
    private func readCounted(into response: inout RawHTTPResponse, length: Int?, maxBody: Int, deadline: Double) {
        if !pending.isEmpty { response.bodyReads += 1 }
        while true {
            let want = length ?? Int.max
            if pending.count >= want {
                response.body = Array(pending[0..<want])
                pending.removeFirst(want)
                response.end = .complete
                return
            }
            if pending.count >= maxBody {
                response.body = Array(pending[0..<maxBody])
                pending.removeAll()
                response.end = .limitReached
                return
            }
            switch receive(deadline: deadline) {
            case .data:
                response.bodyReads += 1
            case .eof:
                response.body = pending
                pending.removeAll()
                response.end = length == nil ? .closeDelimited : .closedEarly
                return
            case .timeout:
                response.body = pending
                pending.removeAll()
                response.end = .timedOut
                return
            }
        }
    }

    private func readChunked(into response: inout RawHTTPResponse, maxBody: Int, deadline: Double) {
        func fill(_ count: Int) -> Received? {
            while pending.count < count {
                let r = receive(deadline: deadline)
                if r != .data { return r }
                response.bodyReads += 1
            }
            return nil
        }
        func line() -> (String?, Received?) {
            while true {
                if let lf = pending.firstIndex(of: 10) {
                    var text = pending[0..<lf]
                    if text.last == 13 { text = text.dropLast() }
                    pending.removeFirst(lf + 1)
                    return (String(decoding: text, as: UTF8.self), nil)
                }
                let r = receive(deadline: deadline)
                if r != .data { return (nil, r) }
            }
        }
        func failed(_ r: Received) {
            response.end = r == .timeout ? .timedOut : .closedEarly
        }
        while true {
            let (sizeLine, problem) = line()
            guard let text = sizeLine else { return failed(problem ?? .eof) }
            let hex = text.split(separator: ";", maxSplits: 1).first.map { $0.faultTrimmed } ?? ""
            guard let size = Int(hex, radix: 16), size >= 0 else {
                response.end = .closedEarly
                return
            }
            if size == 0 {
                // Trailer section, up to the empty line.
                while true {
                    let (trailer, problem) = line()
                    guard let t = trailer else { return failed(problem ?? .eof) }
                    if t.isEmpty { break }
                }
                response.end = .complete
                return
            }
            if let r = fill(size + 2) {
                response.body += pending
                pending.removeAll()
                return failed(r)
            }
            response.body += pending[0..<size]
            pending.removeFirst(size + 2)
            if response.body.count >= maxBody {
                response.end = .limitReached
                return
            }
        }
    }

    private func preview(_ bytes: [UInt8]) -> String {
        String(decoding: bytes.prefix(200), as: UTF8.self).debugDescription
    }
}
