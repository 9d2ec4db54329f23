#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MirrorKit

/// One accepted connection of a ``FaultServer``: reads requests one after another (keep-alive)
/// and answers each according to the path's ``Fault``s, on its own thread.
///
/// Every wait is bounded: reads poll in 200 ms steps and give up after the keep-alive idle time or
/// when the server stops; stalls poll in 100 ms steps until the server stops or the client goes
/// away; sends are bounded by `SO_SNDTIMEO` and woken by the `shutdown` that `stop()` does.
struct FaultConnection {
    let core: FaultServerCore
    let fd: Int32
    let id: Int

    /// What to do once the body has been cut short by a fault.
    private enum AfterCut { case close, idle }

    private enum Framing { case contentLength, chunked, closeDelimited }

    private enum ReadOutcome {
        case request(FaultHTTP.Request)
        case closed
        case bad(status: Int, reason: String, method: String, path: String, version: String)
    }

    func run() {
        defer { lingeringClose() }
        var buffer: [UInt8] = []
        while !core.isStopped {
            switch readRequest(&buffer) {
            case .closed:
                return
            case let .bad(status, reason, method, path, version):
                let log = LogDraft(method: method, path: path, version: version, headers: [:], connectionID: id)
                sendSimple(status: status, detail: reason, extra: [], head: false, keepAlive: false, log: log)
                return
            case .request(let request):
                if !respond(request) { return }
            }
        }
    }

    /// Sends FIN, then reads and drops what the client still sends until it closes too (at most
    /// 1 s, less if the server stops). Closing a socket with unread input makes the kernel send a
    /// reset, which can destroy the response (e.g. a 400 for an oversized head) before the client
    /// has read it; draining first lets the client see every byte and then a clean end of stream.
    private func lingeringClose() {
        shutdown(fd, Int32(SHUT_WR))
        let deadline = monotonicSeconds() + 1
        var scratch = [UInt8](repeating: 0, count: 16 * 1024)
        while monotonicSeconds() < deadline && !core.isStopped {
            let events = FaultSockets.pollReadable(fd, milliseconds: 100)
            if events < 0 { return }
            if events == 0 { continue }
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n == 0 { return }
            if n < 0 && errno != EINTR && errno != EAGAIN { return }
        }
    }

    // MARK: Reading

    private func readRequest(_ buffer: inout [UInt8]) -> ReadOutcome {
        let idleDeadline = monotonicSeconds() + FaultServerCore.keepAliveIdle
        var scratch = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            // RFC 9112 §2.2: ignore empty lines received before a request line.
            while let c = buffer.first, c == 13 || c == 10 { buffer.removeFirst() }
            if let end = FaultHTTP.headEnd(buffer), end.head <= FaultHTTP.maxHeadBytes {
                let request: FaultHTTP.Request
                do {
                    request = try FaultHTTP.parseHead(buffer[0..<end.head])
                } catch FaultHTTP.ParseError.bad(let status, let reason, let method, let path, let version) {
                    return .bad(status: status, reason: reason, method: method, path: path, version: version)
                } catch {
                    return .bad(status: 400, reason: "\(error)", method: "", path: "", version: "")
                }
                buffer.removeFirst(end.body)
                // Read and discard a request body (GET and HEAD normally have none).
                while buffer.count < request.contentLength {
                    guard receive(into: &buffer, scratch: &scratch, deadline: idleDeadline) else { return .closed }
                }
                buffer.removeFirst(request.contentLength)
                return .request(request)
            }
            if buffer.count > FaultHTTP.maxHeadBytes {
                return .bad(status: 400, reason: "request head larger than \(FaultHTTP.maxHeadBytes) bytes",
                            method: "", path: "", version: "")
            }
            guard receive(into: &buffer, scratch: &scratch, deadline: idleDeadline) else { return .closed }
        }
    }

    /// Appends what arrives to `buffer`. False on end of stream, error, stop or deadline.
    private func receive(into buffer: inout [UInt8], scratch: inout [UInt8], deadline: Double) -> Bool {
        while true {
            if core.isStopped || monotonicSeconds() >= deadline { return false }
            let events = FaultSockets.pollReadable(fd, milliseconds: 200)
            if events < 0 { return false }
            if events == 0 { continue }
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                buffer.append(contentsOf: scratch[0..<n])
                return true
            }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            return false
        }
    }

    /// Waits, sending nothing, until the server stops or the client closes its side (data the client
    /// sends meanwhile is read and dropped). Used by stalls and truncated keep-alive responses.
    private func idleUntilStopOrClientGone() {
        var scratch = [UInt8](repeating: 0, count: 4096)
        while !core.isStopped {
            let events = FaultSockets.pollReadable(fd, milliseconds: 100)
            if events < 0 { return }
            if events == 0 { continue }
            if events & Int32(POLLERR | POLLNVAL) != 0 { return }
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n == 0 { return }
            if n < 0 && errno != EINTR && errno != EAGAIN { return }
        }
    }

    // MARK: Responding

    /// What is known about a request for its log entry before the response is finished.
    private struct LogDraft {
        var method: String
        var path: String
        var version: String
        var headers: [String: String]
        var connectionID: Int

        func finish(status: Int, bodyBytes: Int64) -> FaultRequest {
            FaultRequest(method: method, path: path, version: version, headers: headers, rangeHeader: headers["range"],
                         status: status, bodyBytesSent: bodyBytes, connectionID: connectionID)
        }
    }

    private struct Head {
        var version = "HTTP/1.1"
        var status: Int
        var fields: [(String, String)] = []

        init(status: Int, version: String = "HTTP/1.1") {
            self.status = status
            self.version = version
            fields.append(("Date", FaultHTTP.httpDate(Int(time(nil)))))
            fields.append(("Server", "FaultServer"))
        }

        mutating func add(_ name: String, _ value: String) { fields.append((name, value)) }

        var bytes: [UInt8] {
            var text = "\(version) \(status) \(FaultHTTP.reasonPhrase(status))\r\n"
            for (name, value) in fields { text += "\(name): \(value)\r\n" }
            text += "\r\n"
            return Array(text.utf8)
        }
    }

    /// Sends a complete small response (error page, redirect, 416). Returns whether the connection
    /// may be reused.
    @discardableResult
    private func sendSimple(status: Int, detail: String, extra: [(String, String)], head: Bool, keepAlive: Bool,
                            log: LogDraft) -> Bool {
        let body = FaultHTTP.htmlPage(status, detail)
        var response = Head(status: status)
        response.add("Content-Type", "text/html")
        for (name, value) in extra { response.add(name, value) }
        response.add("Content-Length", "\(body.count)")
        response.add("Connection", keepAlive ? "keep-alive" : "close")
        var ok = FaultSockets.sendAll(fd, response.bytes) == response.bytes.count
        var sent: Int64 = 0
        if ok && !head {
            let n = FaultSockets.sendAll(fd, body)
            sent = Int64(n)
            ok = n == body.count
        }
        core.record(log.finish(status: status, bodyBytes: sent))
        return ok && keepAlive
    }

    /// Answers one request. Returns whether the connection stays open for another request.
    private func respond(_ request: FaultHTTP.Request) -> Bool {
        let log = LogDraft(method: request.method, path: request.path, version: request.version,
                           headers: request.headers, connectionID: id)
        let keepAlive = FaultHTTP.wantsKeepAlive(request)
        let isHead = request.method == "HEAD"
        guard request.method == "GET" || isHead else {
            return sendSimple(status: 405, detail: "only GET and HEAD", extra: [("Allow", "GET, HEAD")], head: false,
                              keepAlive: keepAlive, log: log)
        }
        guard let (route, index) = core.take(request.path) else {
            return sendSimple(status: 404, detail: "no such file: \(request.path)", extra: [], head: isHead,
                              keepAlive: keepAlive, log: log)
        }
        let faults = route.faults

        for fault in faults {
            switch fault {
            case let .status(code, times, retryAfter) where index < times:
                var extra: [(String, String)] = []
                if let value = retryAfter { extra.append(("Retry-After", value)) }
                return sendSimple(status: code, detail: "fault injected", extra: extra, head: isHead,
                                  keepAlive: keepAlive, log: log)
            case let .endlessRedirect(target):
                return sendEndless(request: request, isHead: isHead, log: log, status: 302,
                                   extra: [("Location", target), ("Content-Length", "1000000000000")], close: false)
            case let .redirect(target, status):
                return sendSimple(status: status, detail: "moved to \(target)", extra: [("Location", target)],
                                  head: isHead, keepAlive: keepAlive, log: log)
            default:
                continue
            }
        }

        let version = route.changed.flatMap { index >= route.changeAfter ? $0 : nil } ?? route.primary
        let content = version.bytes
        let total = Int64(content.count)
        let weak = faults.contains(.weakETag)
        let etag = weak && !version.etag.hasPrefix("W/") ? "W/" + version.etag : version.etag
        let strongETag: String? = etag.hasPrefix("W/") ? nil : etag
        let lastModified: String? = weak ? nil : version.lastModified

        if faults.contains(.endlessBody) {
            return sendEndless(request: request, isHead: isHead, log: log)
        }
        if faults.contains(.endless416), request.headers["range"] != nil {
            return sendEndless(request: request, isHead: isHead, log: log, status: 416,
                               extra: [("Content-Range", "bytes */\(total)"), ("Content-Type", "text/html")])
        }

        var statusLineVersion = "HTTP/1.1"
        var framing = Framing.contentLength
        var ignoreRange = faults.contains(.ignoreRange)
        for fault in faults {
            if fault == .http10CloseDelimited {
                statusLineVersion = "HTTP/1.0"
                framing = .closeDelimited
                ignoreRange = true
                break
            }
            if fault == .noLength {
                framing = request.version == "HTTP/1.1" ? .chunked : .closeDelimited
                ignoreRange = true
                break
            }
        }

        // Range and If-Range (RFC 9110 §14.2, §13.1.5). Range is only defined for GET.
        var status = 200
        var start: Int64 = 0
        var end: Int64 = total - 1
        var contentRange: String?
        if !isHead, !ignoreRange, let rangeValue = request.headers["range"], let spec = FaultHTTP.parseRange(rangeValue) {
            var validatorMatches = true
            if let ifRange = request.headers["if-range"] {
                // Strong comparison only: a weak tag never matches, a date must equal Last-Modified.
                validatorMatches = (strongETag != nil && ifRange == strongETag) || (lastModified != nil && ifRange == lastModified)
            }
            if validatorMatches {
                switch FaultHTTP.resolve(spec, total: total) {
                case .unsatisfiable:
                    var extra: [(String, String)] = [("Content-Range", "bytes */\(total)"), ("ETag", etag)]
                    if let date = lastModified { extra.append(("Last-Modified", date)) }
                    return sendSimple(status: 416, detail: "range \(rangeValue) outside 0-\(total)", extra: extra,
                                      head: false, keepAlive: keepAlive, log: log)
                case let .range(s, e):
                    status = 206
                    start = s
                    end = e
                    contentRange = "bytes \(s)-\(e)/\(total)"
                }
            }
        }
        if status == 206 {
            for case .lieContentRange(let kind) in faults {
                switch kind {
                case .wrongStart: contentRange = "bytes \(start + 1)-\(end)/\(total)"
                case .wrongEnd: contentRange = "bytes \(start)-\(end > start ? end - 1 : end + 1)/\(total)"
                case .wrongTotal: contentRange = "bytes \(start)-\(end)/\(total + 1000)"
                case .startsAtZero:
                    start = 0
                    end = total - 1
                    contentRange = "bytes 0-\(total - 1)/\(total)"
                }
                break
            }
        }

        let span = max(0, end - start + 1)
        var extraBytes: Int64 = 0
        var flips: [Int64] = []
        var trickleRate: Int?
        var gzip = false
        for fault in faults {
            switch fault {
            case .extraBody(let n): extraBytes += Int64(max(0, n))
            case .flipBytes(let offsets): flips += offsets
            case .flipBytesUntilRevalidated(let offsets):
                if request.headers["cache-control"]?.contains("no-cache") != true { flips += offsets }
            case .trickle(let rate): trickleRate = trickleRate ?? max(1, rate)
            case .contentEncodingGzip: gzip = true
            default: break
            }
        }
        let bodyLength = span + extraBytes

        // Faults that cut the body short: the earliest cut wins.
        var cut: (at: Int64, then: AfterCut)?
        func consider(_ at: Int64, _ then: AfterCut) {
            guard at < bodyLength else { return }
            if cut == nil || at < (cut?.at ?? .max) { cut = (max(0, at), then) }
        }
        for fault in faults {
            switch fault {
            case .dropAt(let offset) where start < offset: consider(offset - start, .close)
            case .dropEvery(let bytes): consider(max(0, bytes), .close)
            case .stall(let after): consider(max(0, after), .idle)
            case .truncatedKeepAlive(let missing) where missing > 0: consider(bodyLength - Int64(missing), .idle)
            default: break
            }
        }

        var head = Head(status: status, version: statusLineVersion)
        head.add("Content-Type", "application/octet-stream")
        if !ignoreRange { head.add("Accept-Ranges", "bytes") }
        head.add("ETag", etag)
        if let date = lastModified { head.add("Last-Modified", date) }
        if let range = contentRange { head.add("Content-Range", range) }
        if gzip { head.add("Content-Encoding", "gzip") }
        switch framing {
        case .contentLength: head.add("Content-Length", "\(bodyLength)")
        case .chunked: head.add("Transfer-Encoding", "chunked")
        case .closeDelimited: break
        }
        let reuse = keepAlive && framing != .closeDelimited
        head.add("Connection", reuse ? "keep-alive" : "close")

        guard FaultSockets.sendAll(fd, head.bytes) == head.bytes.count else {
            core.record(log.finish(status: status, bodyBytes: 0))
            return false
        }
        if isHead {
            core.record(log.finish(status: status, bodyBytes: 0))
            return reuse
        }

        let source = BodySource(content: content, start: start, span: span, flips: flips)
        let limit = cut?.at ?? bodyLength
        var sent: Int64 = 0
        var ok = true
        while sent < limit && ok {
            let size: Int64
            if let rate = trickleRate {
                size = Int64(max(1, rate / 20))
            } else {
                size = Int64(FaultServerCore.chunkSize)
            }
            let count = Int(min(size, limit - sent))
            let chunk = source.bytes(at: sent, count: count)
            if framing == .chunked {
                let framed = Array(String(count, radix: 16).utf8) + [13, 10] + chunk + [13, 10]
                ok = FaultSockets.sendAll(fd, framed) == framed.count
                if ok { sent += Int64(count) }
            } else {
                let n = FaultSockets.sendAll(fd, chunk)
                sent += Int64(n)
                ok = n == count
            }
            if ok, let rate = trickleRate, sent < limit {
                ok = core.pause(Double(count) / Double(rate))
            }
        }
        if ok && cut == nil && framing == .chunked {
            let last: [UInt8] = Array("0\r\n\r\n".utf8)
            ok = FaultSockets.sendAll(fd, last) == last.count
        }
        if ok, let (_, then) = cut, then == .idle {
            idleUntilStopOrClientGone()
        }
        core.record(log.finish(status: status, bodyBytes: sent))
        return ok && cut == nil && reuse
    }

    /// `status` (200 unless told) with no length, close-delimited, sending bytes until the send
    /// fails (client gone, send timeout) or the server stops.
    private func sendEndless(request: FaultHTTP.Request, isHead: Bool, log: LogDraft, status: Int = 200,
                             extra: [(String, String)] = [("Content-Type", "application/octet-stream")], close: Bool = true) -> Bool {
        var head = Head(status: status)
        for (name, value) in extra { head.add(name, value) }
        if close { head.add("Connection", "close") }
        guard FaultSockets.sendAll(fd, head.bytes) == head.bytes.count else {
            core.record(log.finish(status: status, bodyBytes: 0))
            return false
        }
        var sent: Int64 = 0
        if !isHead {
            let chunk = (0..<FaultServerCore.chunkSize).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            while !core.isStopped {
                let n = FaultSockets.sendAll(fd, chunk)
                sent += Int64(n)
                if n < chunk.count { break }
            }
        }
        core.record(log.finish(status: status, bodyBytes: sent))
        return false
    }
}

/// The bytes of a response body: `span` bytes of `content` from `start`, then 0x5A filler (for
/// ``Fault/extraBody(_:)``), with the bytes at the absolute offsets in `flips` inverted.
private struct BodySource {
    let content: [UInt8]
    let start: Int64
    let span: Int64
    let flips: [Int64]

    func bytes(at position: Int64, count: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count)
        let stop = position + Int64(count)
        if position < span {
            let from = Int(start + position)
            let to = Int(start + min(stop, span))
            out.append(contentsOf: content[from..<to])
        }
        if out.count < count { out.append(contentsOf: repeatElement(0x5A, count: count - out.count)) }
        for offset in flips {
            let relative = offset - start
            guard relative >= position, relative < stop, relative < span else { continue }
            out[Int(relative - position)] ^= 0xFF
        }
        return out
    }
}
