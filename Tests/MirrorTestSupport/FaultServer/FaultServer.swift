#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation

/// A small HTTP/1.1 server on a loopback address that misbehaves on request (see ``Fault``), for
/// testing how `mirror` copes with broken servers and networks.
///
/// Why a server of our own next to nginx: nginx is honest, and the failures `mirror` must survive
/// (connections dropped mid-body, stalls, lying Content-Range, content replaced between requests,
/// bodies that never end) cannot be produced with it reliably. The server is written for tests, not
/// for speed: one thread per connection, bodies served from memory.
///
/// Bounded in time, as the project requires:
/// - it binds port 0 and reads the port back with `getsockname`, so there is no free-port race;
/// - every connection socket has `SO_SNDTIMEO`, so a send to a client that stopped reading fails
///   instead of hanging;
/// - ``stop()`` (also run by `deinit`) shuts down the listener and every open connection both ways,
///   wakes every pause and stall, and waits (at most a few seconds) for all threads to finish, so no
///   thread or connection outlives it — not even an endless body or a stall;
/// - idle keep-alive connections are closed after 30 s.
///
/// Only loopback addresses can be used (127.0.0.0/8, `::1`): `127.0.0.2` serves as "another host".
public final class FaultServer {
    /// The address listened on, as given to `init`.
    public let host: String
    /// The TCP port the kernel chose.
    public let port: Int

    private let core: FaultServerCore

    /// Starts listening on `host` (a numeric loopback address) and a free port.
    ///
    /// - Parameter sendTimeout: `SO_SNDTIMEO` of every connection: how long one send to a client
    ///   that does not read may block before the connection is dropped.
    public init(host: String = "127.0.0.1", sendTimeout: Double = 5) throws {
        let address = try FaultSockets.loopbackAddress(host, port: 0)
        let fd = try FaultSockets.tcpSocket(family: address.family)
        var handedOver = false
        defer { if !handedOver { close(fd) } }
        FaultSockets.setFlag(fd, level: SOL_SOCKET, SO_REUSEADDR)
        if address.family == AF_INET6 { FaultSockets.setFlag(fd, level: Int32(IPPROTO_IPV6), IPV6_V6ONLY) }
        let bound = address.withSockaddr { bind(fd, $0, $1) }
        guard bound == 0 else { throw HarnessError.posix("bind \(host):0") }
        guard listen(fd, 128) == 0 else { throw HarnessError.posix("listen on \(host)") }
        let chosen = try FaultSockets.localPort(fd)
        self.host = host
        self.port = chosen
        core = FaultServerCore(listenFD: fd, sendTimeout: sendTimeout, label: "\(host):\(chosen)")
        handedOver = true
        core.startAcceptThread()
    }

    deinit { core.stop() }

    /// `http://HOST:PORT/` (IPv6 hosts in brackets).
    public var baseURL: String {
        host.contains(":") ? "http://[\(host)]:\(port)/" : "http://\(host):\(port)/"
    }

    /// The URL of `path` on this server (`path` with or without its leading slash).
    public func url(_ path: String) -> String {
        baseURL + (path.hasPrefix("/") ? String(path.dropFirst()) : path)
    }

    /// Serves `bytes` at `path` (e.g. `"/a.bin"`, matched exactly against the request path without
    /// its query string) with `fault`. May be called at any time, also while requests are running:
    /// a request uses the content registered when it started. Calling it again for the same path
    /// replaces content and fault, restarts the path's request count (used by ``Fault/status(code:times:retryAfter:)``
    /// and ``Fault/changeAfter(requests:to:)``), and — if the content differs — changes the ETag.
    ///
    /// - Parameter etag: the entity tag to send, with or without quotes (quotes are added when
    ///   missing; a `W/"..."` value is sent as is, making the validator weak). By default it is a
    ///   strong tag derived from the SHA-256 of the content. Last-Modified is a fixed date that moves
    ///   forward with every `serve` call, so it also changes with the content.
    public func serve(_ path: String, bytes: [UInt8], fault: Fault = .none, etag: String? = nil) {
        core.serve(path, bytes: bytes, fault: fault, etag: etag)
    }

    /// Removes the content at `path` (later requests get 404).
    public func remove(_ path: String) {
        core.remove(path)
    }

    /// Every request answered so far, in the order their responses ended.
    public func requests() -> [FaultRequest] { core.requests() }

    /// The requests to `path` answered so far.
    public func requests(for path: String) -> [FaultRequest] { core.requests().filter { $0.path == path } }

    /// Total body bytes sent for `path` over all requests.
    public func bytesSent(for path: String) -> Int64 {
        core.requests().filter { $0.path == path }.reduce(0) { $0 + $1.bodyBytesSent }
    }

    /// Number of requests logged so far.
    public var requestCount: Int { core.requests().count }

    /// Waits until at least `count` requests have been logged or `timeout` seconds have passed, and
    /// returns the log. A response is logged when the server has finished it, which can be a moment
    /// after the client has read its last byte.
    public func waitForRequests(count: Int, timeout: Double = 5) -> [FaultRequest] {
        core.waitForRequests(count: count, timeout: timeout)
    }

    /// Stops the server: closes the listener, shuts down every open connection (ending endless
    /// bodies, stalls and trickles), and waits up to `timeout` seconds for all its threads.
    /// Idempotent. Returns true when every thread has finished.
    @discardableResult
    public func stop(timeout: Double = 4) -> Bool {
        core.stop(timeout: timeout)
    }

    /// An IMF-fixdate for `secondsSince1970` (for `Retry-After` dates in tests).
    public static func httpDate(secondsSince1970: Int) -> String {
        FaultHTTP.httpDate(secondsSince1970)
    }
}

/// The state and threads behind a ``FaultServer``.
///
/// A separate object so that the threads can hold it without holding the `FaultServer`: otherwise
/// the accept thread would keep the server alive forever and `deinit` (which stops it) would never
/// run. Every mutable property is guarded by `state`.
final class FaultServerCore: @unchecked Sendable {
    /// Close an idle keep-alive connection after this long without a request.
    static let keepAliveIdle = 30.0
    /// Body bytes per send for untrickled bodies.
    static let chunkSize = 64 * 1024

    struct Version {
        var bytes: [UInt8]
        var etag: String
        var lastModified: String
    }

    struct Route {
        var primary: Version
        var changed: Version?
        var changeAfter: Int
        var faults: [Fault]
        var requestCount = 0
    }

    let listenFD: Int32
    let sendTimeout: Double
    let label: String
    private let state = NSCondition()
    private let threads = DispatchGroup()
    private var stopped = false
    private var routes: [String: Route] = [:]
    private var log: [FaultRequest] = []
    private var openConnections: [Int: Int32] = [:]
    private var nextConnectionID = 1
    private var generation = 0

    init(listenFD: Int32, sendTimeout: Double, label: String) {
        self.listenFD = listenFD
        self.sendTimeout = sendTimeout
        self.label = label
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        state.lock()
        defer { state.unlock() }
        return try body()
    }

    var isStopped: Bool { locked { stopped } }

    // MARK: Content

    func serve(_ path: String, bytes: [UInt8], fault: Fault, etag: String?) {
        let faults = fault.flattened
        var changeAfter = Int.max
        var changedBytes: [UInt8]?
        for case let .changeAfter(requests, to) in faults where changedBytes == nil {
            changeAfter = max(0, requests)
            changedBytes = to
        }
        let primaryTag = etag.map(Self.normaliseETag) ?? Self.contentETag(bytes)
        let changedTag = changedBytes.map(Self.contentETag)
        locked {
            generation += 1
            let primary = Version(bytes: bytes, etag: primaryTag, lastModified: Self.lastModified(generation))
            var changed: Version?
            if let other = changedBytes, let tag = changedTag {
                generation += 1
                changed = Version(bytes: other, etag: tag, lastModified: Self.lastModified(generation))
            }
            routes[path] = Route(primary: primary, changed: changed, changeAfter: changeAfter, faults: faults)
        }
    }

    func remove(_ path: String) {
        locked { routes[path] = nil }
    }

    /// A strong ETag from the content's SHA-256 (its first 16 hex digits): equal content, equal tag.
    static func contentETag(_ bytes: [UInt8]) -> String {
        "\"" + String(TestData.sha256(of: bytes).prefix(16)) + "\""
    }

    static func normaliseETag(_ tag: String) -> String {
        if tag.hasPrefix("\"") || tag.hasPrefix("W/\"") { return tag }
        return "\"\(tag)\""
    }

    /// 2023-01-01 00:00:00 UTC plus one hour per `serve` generation: fixed (reproducible), in the
    /// past (so it counts as a strong validator, RFC 9110 §8.8.2.2), and different for new content.
    static func lastModified(_ generation: Int) -> String {
        FaultHTTP.httpDate(1_672_531_200 + generation * 3600)
    }

    // MARK: Log

    func requests() -> [FaultRequest] { locked { log } }

    func record(_ entry: FaultRequest) {
        state.lock()
        log.append(entry)
        state.broadcast()
        state.unlock()
    }

    func waitForRequests(count: Int, timeout: Double) -> [FaultRequest] {
        let deadline = Date(timeIntervalSinceNow: max(0, timeout))
        state.lock()
        defer { state.unlock() }
        while log.count < count {
            if !state.wait(until: deadline) { break }
        }
        return log
    }

    // MARK: Lifecycle

    func startAcceptThread() {
        threads.enter()
        let thread = Thread { [self] in
            defer { threads.leave() }
            acceptLoop()
        }
        thread.name = "FaultServer accept \(label)"
        thread.start()
    }

    /// Polls the listener in 100 ms steps so that it notices `stop()` promptly even if shutting
    /// down a listening socket does not wake `poll` on some kernel; closes the listener on exit.
    private func acceptLoop() {
        defer { close(listenFD) }
        while !isStopped {
            let events = FaultSockets.pollReadable(listenFD, milliseconds: 100)
            if events <= 0 { continue }
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                if errno == EINTR || errno == EAGAIN || errno == ECONNABORTED { continue }
                if isStopped { return }
                // EMFILE and the like: back off briefly rather than spin.
                sleepSeconds(0.01)
                continue
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            FaultSockets.setTimeout(fd, SO_SNDTIMEO, seconds: sendTimeout)
            FaultSockets.setFlag(fd, level: Int32(IPPROTO_TCP), TCP_NODELAY)
            // Register under the lock, so that stop() either sees this connection or we see stop().
            let id: Int? = locked {
                if stopped { return nil }
                let id = nextConnectionID
                nextConnectionID += 1
                openConnections[id] = fd
                threads.enter()
                return id
            }
            guard let connectionID = id else {
                close(fd)
                return
            }
            let thread = Thread { [self] in
                defer { threads.leave() }
                FaultConnection(core: self, fd: fd, id: connectionID).run()
                closeConnection(connectionID)
            }
            thread.name = "FaultServer connection \(connectionID)"
            thread.start()
        }
    }

    /// Closes a connection's socket. Under the lock, so that `stop()` never shuts down a
    /// descriptor number that has already been closed and reused.
    private func closeConnection(_ id: Int) {
        locked {
            if let fd = openConnections.removeValue(forKey: id) {
                shutdown(fd, Int32(SHUT_WR))
                close(fd)
            }
        }
    }

    @discardableResult
    func stop(timeout: Double = 4) -> Bool {
        locked {
            if !stopped {
                stopped = true
                shutdown(listenFD, Int32(SHUT_RDWR))
                for fd in openConnections.values { shutdown(fd, Int32(SHUT_RDWR)) }
            }
            state.broadcast()
        }
        let finished = threads.wait(timeout: .now() + max(0, timeout)) == .success
        if !finished {
            FileHandle.standardError.write(Data("FaultServer \(label): threads still running \(timeout) s after stop()\n".utf8))
        }
        return finished
    }

    // MARK: Used by connections

    /// Sleeps up to `seconds`, returning early (false) when the server stops.
    func pause(_ seconds: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        state.lock()
        defer { state.unlock() }
        while !stopped {
            if !state.wait(until: deadline) { return true }
        }
        return false
    }

    /// Looks up `path` and counts the request. Returns the route and this request's index
    /// (0 for the first request to the path since `serve`).
    func take(_ path: String) -> (route: Route, index: Int)? {
        locked {
            guard var route = routes[path] else { return nil }
            let index = route.requestCount
            route.requestCount += 1
            routes[path] = route
            return (route, index)
        }
    }
}
