#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorKit

/// One client connection through ``LinkProxy``: a socket to the server and a ``LinkPump`` each
/// way (the client's bytes on a thread of their own, the server's on this one), and the fault, if
/// one was queued for it. Both sockets are closed when both pumps have ended.
struct LinkConnection {
    let proxy: LinkProxyState
    let client: Int32
    let link: LinkProxy.Link
    let fault: LinkProxy.Fault?

    /// Flags both pumps of a connection read: set once, never cleared.
    final class Ends: Sendable {
        struct State: Sendable {
            var upEnded = false
            var downEnded = false
            var broken = false
            var reset = false
        }
        let state = Locked(State())
    }

    func run() {
        defer { proxy.connectionEnded() }
        Self.configure(client)
        if fault == .stallHandshake {
            holdSilently()
            proxy.closeSocket(client)
            return
        }
        guard let server = proxy.connectToTarget() else {
            // The server refused: the client sees the connection reset, as it would without a proxy.
            proxy.closeSocket(client, reset: true)
            return
        }
        Self.configure(server)
        let ends = Ends()
        let opened = monotonicSeconds()
        let upDone = DispatchSemaphore(value: 0)
        proxy.spawn("LinkProxy up") { [proxy, client, link] in
            LinkPump(proxy: proxy, from: client, to: server, link: link, fault: nil, ends: ends, down: false, opened: opened).run()
            upDone.signal()
        }
        LinkPump(proxy: proxy, from: server, to: client, link: link, fault: fault, ends: ends, down: true, opened: opened).run()
        upDone.wait()
        let reset = ends.state.withLock { $0.reset }
        proxy.closeSocket(server)
        proxy.closeSocket(client, reset: reset)
    }

    /// A stalled handshake: reads and drops what the client sends, answers nothing, until the
    /// client hangs up or the proxy stops.
    private func holdSilently() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !proxy.isStopped {
            var entry = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            if n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN) { return }
        }
    }

    static func configure(_ fd: Int32) {
        FaultSockets.setFlag(fd, level: Int32(IPPROTO_TCP), TCP_NODELAY)
        FaultSockets.setTimeout(fd, SO_SNDTIMEO, seconds: 10)
    }
}

/// One direction of one connection (see ``LinkProxy`` for the model): reads from `from` while
/// the queue has room, and passes each chunk on to `to` once its time has come.
struct LinkPump {
    let proxy: LinkProxyState
    let from: Int32
    let to: Int32
    let link: LinkProxy.Link
    let fault: LinkProxy.Fault?
    let ends: LinkConnection.Ends
    let down: Bool
    /// When the proxy accepted the connection: the TCP handshake's round trip, which the kernel
    /// answered at once, is charged to the client's first bytes (they leave no earlier than one
    /// round trip after it), so a request's first answer comes two round trips after `connect`,
    /// as over the real link.
    let opened: Double

    private struct Chunk {
        var bytes: [UInt8]
        var due: Double
    }

    /// Most bytes waiting: the link's bandwidth-delay product plus a router's 256 KiB (16 MiB
    /// where the rate is not capped). A connection never carries more than the shared rate, so
    /// that caps its product too.
    var queueLimit: Int {
        let rates = [link.bytesPerSecond, link.totalBytesPerSecond].compactMap { $0 }
        guard let rate = rates.min() else { return 16 << 20 }
        return Int(min(Double(64 << 20), Double(rate) * link.roundTrip)) + (256 << 10)
    }

    /// Most seconds of bytes the shared bottleneck holds before its pumps stop reading: what one
    /// connection's queue holds beyond the bytes on the wire (half a round trip at the rate, plus
    /// 256 KiB), so that the senders meet a full buffer whether they share the link or not.
    func sharedBacklogLimit(rate: Int64) -> Double {
        link.roundTrip / 2 + Double(256 << 10) / Double(rate)
    }

    func run() {
        defer {
            ends.state.withLock { if down { $0.downEnded = true } else { $0.upEnded = true } }
        }
        let oneWay = link.roundTrip / 2
        var queue: [Chunk] = []
        var head = 0
        var queued = 0
        var busy = down ? 0 : opened + link.roundTrip
        var sawEnd = false
        var endDue = 0.0
        var passed: Int64 = 0
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while !proxy.isStopped {
            if ends.state.withLock({ $0.broken }) { return }
            let now = monotonicSeconds()
            while head < queue.count, queue[head].due <= now {
                guard pass(queue[head].bytes, passed: &passed) else { return }
                queued -= queue[head].bytes.count
                head += 1
            }
            if head > 1024 { queue.removeFirst(head); head = 0 }
            if sawEnd && head == queue.count {
                if now >= endDue {
                    shutdown(to, Int32(SHUT_WR))
                    return
                }
            }
            var next = head < queue.count ? queue[head].due : (sawEnd ? endDue : now + 0.1)
            var reading = !sawEnd && queued < queueLimit
            if reading, let total = link.totalBytesPerSecond {
                // The shared queue is full: wait until it has drained to its limit.
                let roomAt = proxy.sharedBusy(down: down) - sharedBacklogLimit(rate: total)
                if roomAt > now {
                    reading = false
                    next = min(next, roomAt)
                }
            }
            let wait = Int32(max(0, min(100, ((next - now) * 1000).rounded(.up))))
            var entry = pollfd(fd: from, events: reading ? Int16(POLLIN) : 0, revents: 0)
            let ready = poll(&entry, 1, wait)
            guard reading, ready > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            let read = monotonicSeconds()
            guard n > 0 else {
                // The sender closed (or failed): the FIN travels behind the last chunk.
                sawEnd = true
                endDue = max(read, busy) + oneWay
                continue
            }
            let start = max(read, busy)
            busy = start + (link.bytesPerSecond.map { Double(n) / Double($0) } ?? 0)
            // A chunk leaves once both its connection's bottleneck and the shared one let it.
            let leaves = max(busy, link.totalBytesPerSecond.map { proxy.leaveShared(ready: read, bytes: n, rate: $0, down: down) } ?? 0)
            queue.append(Chunk(bytes: Array(buffer[0..<n]), due: leaves + oneWay))
            queued += n
        }
    }

    /// Sends `bytes` on, as far as the fault allows. False when the connection is over: the
    /// receiver is gone, or the fault broke it here (a stall then holds until the proxy stops or
    /// the client hangs up).
    private func pass(_ bytes: [UInt8], passed: inout Int64) -> Bool {
        var allowed = bytes.count
        var breaking: LinkProxy.Fault?
        if down, let fault {
            switch fault {
            case .stallAfter(let limit), .cutAfter(let limit), .resetAfter(let limit):
                let room = max(0, limit - passed)
                if room < Int64(bytes.count) {
                    allowed = Int(room)
                    breaking = fault
                }
            case .stallHandshake:
                break
            }
        }
        let sent = FaultSockets.sendAll(to, bytes[0..<allowed])
        passed += Int64(sent)
        proxy.carried(sent, down: down)
        if sent < allowed { return false }
        guard let breaking else { return true }
        switch breaking {
        case .stallAfter:
            while !proxy.isStopped && !ends.state.withLock({ $0.upEnded }) { usleep(20_000) }
        case .cutAfter:
            ends.state.withLock { $0.broken = true }
            shutdown(to, Int32(SHUT_RDWR))
            shutdown(from, Int32(SHUT_RDWR))
        case .resetAfter:
            ends.state.withLock { $0.broken = true; $0.reset = true }
            shutdown(to, Int32(SHUT_RD))
            shutdown(from, Int32(SHUT_RDWR))
        case .stallHandshake:
            break
        }
        return false
    }
}
