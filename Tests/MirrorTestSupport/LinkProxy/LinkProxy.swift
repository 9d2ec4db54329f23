#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import MirrorKit

/// A distant link on loopback: a TCP proxy in front of one server port that adds a round trip,
/// caps each connection's rate and breaks chosen connections, as a WAN and its middleboxes do.
///
/// Why a proxy of our own: netem (`tc qdisc ... netem`) needs the `sch_netem` module, which these
/// machines do not have, and toxiproxy is not packaged by Debian. A proxy in the tests' language
/// runs in the test process, needs no privilege, and counts what it carried (connections opened,
/// at most open at once, bytes each way) for the tests and `bench/wan` to read.
///
/// The model of one direction of one connection (``LinkPump``): a chunk read from the sender at
/// time t leaves the bottleneck at `max(t, busy) + bytes ÷ rate` and arrives half a round trip
/// later; a FIN arrives after the last chunk. The pump stops reading while more than the link's
/// bandwidth-delay product plus 256 KiB waits, so TCP's own flow control pushes back on the sender
/// as a full queue at a router would. The rate is per connection (per-flow shaping, as a campus
/// link or a VPN concentrator applies it), so N connections get N times the rate.
///
/// A link may also have a total rate that all its connections share (``Link/totalBytesPerSecond``):
/// a mirror whose own uplink is the limit, where more connections to it get no more bytes, only a
/// share. That bottleneck is one queue per direction for the whole proxy: a chunk read at t leaves
/// it at `max(t, busy) + bytes ÷ total`, and leaves the link when both that queue and its
/// connection's own have let it (the later of the two times; taken one after the other, the two
/// queues left the shared one idle whenever a connection's own queue lagged). A pump stops reading
/// while the shared queue holds more than half a round trip plus 256 KiB of waiting bytes, so the
/// senders meet a full shared buffer too.
///
/// Faults (``Fault``) apply to the server's bytes towards the client, for the next connections
/// accepted after ``breakNext(_:connections:)``. A TLS origin behind the proxy turns
/// ``Fault/cutAfter(bytes:)`` into a TLS session cut without `close_notify`, and
/// ``Fault/stallHandshake`` into a handshake that never completes.
///
/// Bounded as the harness requires: it listens on 127.0.0.1 only, connects only to a loopback
/// port, every socket has `SO_SNDTIMEO`, and ``stop()`` (also run by `deinit`) shuts every socket
/// and waits for every thread.
public final class LinkProxy: Sendable {
    /// What the link adds. Changing ``LinkProxy/link`` applies to connections accepted afterwards.
    public struct Link: Sendable, CustomStringConvertible {
        /// Seconds added to every round trip: half on the way to the server, half back.
        public var roundTrip: Double
        /// Bytes per second each connection may carry in each direction; nil for no cap.
        public var bytesPerSecond: Int64?
        /// Bytes per second all connections together may carry in each direction, as one server's
        /// uplink allows whatever the number of flows; nil for no shared cap.
        public var totalBytesPerSecond: Int64?

        public init(roundTrip: Double = 0, bytesPerSecond: Int64? = nil, totalBytesPerSecond: Int64? = nil) {
            self.roundTrip = max(0, roundTrip)
            self.bytesPerSecond = bytesPerSecond.map { max(1, $0) }
            self.totalBytesPerSecond = totalBytesPerSecond.map { max(1, $0) }
        }

        /// `megabits` Mbit/s in bytes per second (1 Mbit = 10^6 bits, as links are sold).
        public static func megabits(_ megabits: Double) -> Int64 { Int64(megabits * 1_000_000 / 8) }

        public var description: String {
            "\(Int((roundTrip * 1000).rounded())) ms round trip, "
                + (bytesPerSecond.map { "\(Double($0) * 8 / 1_000_000) Mbit/s per connection" } ?? "no rate cap")
                + (totalBytesPerSecond.map { ", \(Double($0) * 8 / 1_000_000) Mbit/s in all" } ?? "")
        }
    }

    /// How a connection breaks; bytes count what the proxy passed from the server to the client.
    public enum Fault: Sendable, Equatable {
        /// After `bytes`, nothing more reaches the client, and the connection stays open.
        case stallAfter(bytes: Int64)
        /// After `bytes`, the client gets a FIN and the server's side is closed: over TLS, a
        /// session cut without `close_notify`.
        case cutAfter(bytes: Int64)
        /// After `bytes`, the client gets a RST (`SO_LINGER` 0, then `close`).
        case resetAfter(bytes: Int64)
        /// The connection is accepted and nothing is passed either way: a TLS handshake that stalls.
        case stallHandshake
    }

    /// What the proxy carried so far.
    public struct Counts: Sendable, Equatable {
        /// Connections accepted.
        public var accepted = 0
        /// Connections open now, and the most that were open at once.
        public var open = 0
        public var mostOpen = 0
        /// Bytes passed to the server, and to the clients.
        public var bytesUp: Int64 = 0
        public var bytesDown: Int64 = 0
        /// Connections a ``Fault`` broke.
        public var broken = 0
    }

    /// The port clients connect to, on 127.0.0.1.
    public let port: Int
    /// The server port behind it, on 127.0.0.1.
    public let targetPort: Int
    let shared: LinkProxyState

    /// Listens on 127.0.0.1 and a port the kernel picks, in front of 127.0.0.1:`targetPort`.
    public init(to targetPort: Int, link: Link = Link()) throws {
        let address = try FaultSockets.loopbackAddress("127.0.0.1", port: 0)
        let fd = try FaultSockets.tcpSocket(family: address.family)
        var handedOver = false
        defer { if !handedOver { close(fd) } }
        FaultSockets.setFlag(fd, level: SOL_SOCKET, SO_REUSEADDR)
        guard address.withSockaddr({ bind(fd, $0, $1) }) == 0 else { throw HarnessError.posix("bind 127.0.0.1:0") }
        guard listen(fd, 512) == 0 else { throw HarnessError.posix("listen") }
        port = try FaultSockets.localPort(fd)
        self.targetPort = targetPort
        shared = LinkProxyState(listenFD: fd, targetPort: targetPort, link: link)
        handedOver = true
        shared.startAccepting()
    }

    deinit { stop() }

    /// `http://127.0.0.1:PORT/` or, with `tls`, `https://HOST:PORT/` (`host` a name the server's
    /// certificate holds, resolved to 127.0.0.1 by the client, e.g. with curl's `--resolve`).
    public func baseURL(tls: Bool = false, host: String = "127.0.0.1") -> String {
        "\(tls ? "https" : "http")://\(host):\(port)/"
    }

    /// The link new connections get.
    public var link: Link {
        get { shared.state.withLock { $0.link } }
        set { shared.state.withLock { $0.link = newValue } }
    }

    /// Breaks the next `connections` connections accepted with `fault`, after any faults queued before.
    public func breakNext(_ fault: Fault, connections: Int = 1) {
        shared.state.withLock { $0.faults += Array(repeating: fault, count: max(0, connections)) }
    }

    public var counts: Counts { shared.state.withLock { $0.counts } }

    /// Shuts the listener and every connection both ways and waits (at most `timeout` seconds)
    /// for every thread. Returns false when a thread outlived it.
    @discardableResult
    public func stop(timeout: Double = 4) -> Bool { shared.stop(timeout: timeout) }
}

/// What the proxy's threads share, each field under one lock.
final class LinkProxyState: Sendable {
    struct State: Sendable {
        var link: LinkProxy.Link
        var faults: [LinkProxy.Fault] = []
        var counts = LinkProxy.Counts()
        var stopped = false
        /// Every open socket, so that `stop()` can shut it (only under the lock, before its close).
        var sockets: Set<Int32> = []
    }

    /// The shared bottleneck of ``LinkProxy/Link/totalBytesPerSecond``: when each direction's queue
    /// is next free (monotonic seconds). Its own lock, taken once per chunk and per pump wake-up.
    struct Shared: Sendable {
        var upBusy = 0.0
        var downBusy = 0.0
    }

    let listenFD: Int32
    let targetPort: Int
    let state: Locked<State>
    let shared = Locked(Shared())
    let threads = DispatchGroup()

    init(listenFD: Int32, targetPort: Int, link: LinkProxy.Link) {
        self.listenFD = listenFD
        self.targetPort = targetPort
        state = Locked(State(link: link))
    }

    var isStopped: Bool { state.withLock { $0.stopped } }

    func startAccepting() {
        spawn("LinkProxy accept") { [self] in acceptLoop() }
    }

    func spawn(_ name: String, _ body: @escaping @Sendable () -> Void) {
        threads.enter()
        let thread = Thread { [threads] in
            defer { threads.leave() }
            body()
        }
        thread.name = name
        thread.start()
    }

    /// Polls the listener in 100 ms steps, so that it notices `stop()` even where shutting a
    /// listening socket does not wake `poll`; closes the listener on exit.
    private func acceptLoop() {
        defer { close(listenFD) }
        while !isStopped {
            var entry = pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) > 0 else { continue }
            let client = accept(listenFD, nil, nil)
            guard client >= 0 else {
                if errno != EINTR && errno != EAGAIN && errno != ECONNABORTED { usleep(10_000) }
                continue
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            let taken: (LinkProxy.Link, LinkProxy.Fault?)? = state.withLock { s in
                guard !s.stopped else { return nil }
                s.sockets.insert(client)
                s.counts.accepted += 1
                s.counts.open += 1
                s.counts.mostOpen = max(s.counts.mostOpen, s.counts.open)
                let fault = s.faults.isEmpty ? nil : s.faults.removeFirst()
                if fault != nil { s.counts.broken += 1 }
                return (s.link, fault)
            }
            guard let (link, fault) = taken else {
                close(client)
                return
            }
            spawn("LinkProxy connection") { [self] in
                LinkConnection(proxy: self, client: client, link: link, fault: fault).run()
            }
        }
    }

    /// Opens a socket to the server, registered for `stop()`; nil when it cannot connect.
    func connectToTarget() -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = Loopback.loopbackAddress(port: targetPort)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let registered = connected == 0 && state.withLock { s -> Bool in
            guard !s.stopped else { return false }
            s.sockets.insert(fd)
            return true
        }
        guard registered else {
            close(fd)
            return nil
        }
        return fd
    }

    /// Closes a socket of a connection that ended, under the lock (so that `stop()` never shuts a
    /// descriptor number already reused). `reset`: with `SO_LINGER` 0, so the peer gets a RST.
    func closeSocket(_ fd: Int32, reset: Bool = false) {
        state.withLock { s in
            guard s.sockets.remove(fd) != nil else { return }
            if reset {
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            }
            close(fd)
        }
    }

    /// When a chunk of `bytes` read at `ready` leaves the shared bottleneck, at `rate` bytes per
    /// second; the queue is then busy until that time.
    func leaveShared(ready: Double, bytes: Int, rate: Int64, down: Bool) -> Double {
        shared.withLock { s in
            let start = max(ready, down ? s.downBusy : s.upBusy)
            let leaves = start + Double(bytes) / Double(rate)
            if down { s.downBusy = leaves } else { s.upBusy = leaves }
            return leaves
        }
    }

    /// When the shared bottleneck of one direction is next free.
    func sharedBusy(down: Bool) -> Double {
        shared.withLock { down ? $0.downBusy : $0.upBusy }
    }

    func connectionEnded() {
        state.withLock { $0.counts.open -= 1 }
    }

    func carried(_ bytes: Int, down: Bool) {
        state.withLock { s in
            if down { s.counts.bytesDown += Int64(bytes) } else { s.counts.bytesUp += Int64(bytes) }
        }
    }

    @discardableResult
    func stop(timeout: Double) -> Bool {
        state.withLock { s in
            guard !s.stopped else { return }
            s.stopped = true
            shutdown(listenFD, Int32(SHUT_RDWR))
            for fd in s.sockets { shutdown(fd, Int32(SHUT_RDWR)) }
        }
        let finished = threads.wait(timeout: .now() + max(0, timeout)) == .success
        if !finished {
            FileHandle.standardError.write(Data("LinkProxy: threads still running \(timeout) s after stop()\n".utf8))
        }
        return finished
    }
}
