#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorTestSupport
import Testing

/// Checks ``FaultServer`` itself: each fault must do exactly what its documentation says, so that a
/// failing `mirror` test can be blamed on `mirror`. Every check compares real values (bytes, header
/// values, log fields); a server that ignored its fault, or served nothing, would fail here.
///
/// Clients: `Loopback.httpGet` (HTTP/1.0, reads until close), ``RawHTTPClient`` (HTTP/1.1,
/// keep-alive, reports how a body ended) and, where it is installed, `curl` as an independent real
/// client (those tests are disabled, with a message, when it is missing).
@Suite struct FaultServerTests {
    static let curlPath: String? = {
        var candidates = ["/usr/bin/curl"]
        candidates += (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/curl" }
        return candidates.first { access($0, X_OK) == 0 }
    }()

    static let ipv6LoopbackAvailable: Bool = (try? FaultServer(host: "::1")) != nil

    /// 10 000 deterministic pseudo-random bytes: any byte from a wrong offset shows.
    let content = TestData.bytes(count: 10_000, seed: 11)

    private func get(_ server: FaultServer, _ path: String, _ headers: [String: String] = [:]) throws
        -> (status: Int, headers: [String: String], body: [UInt8])
    {
        try Loopback.httpGet(port: server.port, path: path, headers: headers, timeout: 5)
    }

    private func slice(_ range: ClosedRange<Int>) -> [UInt8] { Array(content[range]) }

    // MARK: Honest behaviour

    @Test func honestFullHeadRangesAnd404() throws {
        let server = try FaultServer()
        server.serve("/a.bin", bytes: content)

        let full = try get(server, "/a.bin")
        #expect(full.status == 200)
        #expect(full.body == content)
        #expect(full.headers["content-length"] == "10000")
        #expect(full.headers["accept-ranges"] == "bytes")
        #expect(full.headers["content-range"] == nil)
        let etag = try #require(full.headers["etag"])
        #expect(etag.hasPrefix("\"") && etag.hasSuffix("\"") && etag.count == 18)
        #expect(full.headers["last-modified"]?.hasSuffix(" GMT") == true)

        let client = try RawHTTPClient(port: server.port)
        let head = try client.request("HEAD", "/a.bin")
        #expect(head.status == 200)
        #expect(head.headers["content-length"] == "10000")
        #expect(head.headers["etag"] == etag)
        #expect(head.body.isEmpty)
        // Range is not defined for HEAD: ignored.
        let headRange = try client.request("HEAD", "/a.bin", headers: [("Range", "bytes=5-")])
        #expect(headRange.status == 200)
        #expect(headRange.headers["content-length"] == "10000")

        let cases: [(String, String, ClosedRange<Int>)] = [
            ("bytes=4000-", "bytes 4000-9999/10000", 4000...9999),
            ("bytes=10-19", "bytes 10-19/10000", 10...19),
            ("bytes=9990-20000", "bytes 9990-9999/10000", 9990...9999),
            ("bytes=-100", "bytes 9900-9999/10000", 9900...9999),
            ("bytes=0-0", "bytes 0-0/10000", 0...0),
        ]
        for (range, expected, bytes) in cases {
            let r = try get(server, "/a.bin", ["Range": range])
            #expect(r.status == 206, "\(range)")
            #expect(r.headers["content-range"] == expected, "\(range)")
            #expect(r.headers["content-length"] == "\(bytes.count)", "\(range)")
            #expect(r.body == slice(bytes), "\(range)")
        }
        for range in ["bytes=10000-", "bytes=20000-30000", "bytes=-0"] {
            let r = try get(server, "/a.bin", ["Range": range])
            #expect(r.status == 416, "\(range)")
            #expect(r.headers["content-range"] == "bytes */10000", "\(range)")
        }
        // Invalid or multiple ranges are ignored (RFC 9110 §14.2): 200 with everything.
        for range in ["bytes=5-2", "bytes=0-1,5-6", "lines=1-2", "bytes=x-"] {
            let r = try get(server, "/a.bin", ["Range": range])
            #expect(r.status == 200, "\(range)")
            #expect(r.body == content, "\(range)")
        }

        let missing = try get(server, "/missing.bin")
        #expect(missing.status == 404)
        #expect(missing.headers["content-type"] == "text/html")
        #expect(String(decoding: missing.body, as: UTF8.self).contains("<h1>404 Not Found</h1>"))
        // A query string is not part of the path.
        #expect(try get(server, "/a.bin?x=1").body == content)
    }

    @Test func ifRangeHonoursOnlyTheCurrentStrongValidator() throws {
        let server = try FaultServer()
        server.serve("/a.bin", bytes: content)
        let first = try get(server, "/a.bin")
        let etag = try #require(first.headers["etag"])
        let date = try #require(first.headers["last-modified"])

        let byTag = try get(server, "/a.bin", ["Range": "bytes=100-", "If-Range": etag])
        #expect(byTag.status == 206)
        #expect(byTag.body == slice(100...9999))
        let byDate = try get(server, "/a.bin", ["Range": "bytes=100-", "If-Range": date])
        #expect(byDate.status == 206)
        for validator in ["\"other\"", "W/" + etag, "Sun, 01 Jan 2023 00:00:00 GMT"] {
            let r = try get(server, "/a.bin", ["Range": "bytes=100-", "If-Range": validator])
            #expect(r.status == 200, "\(validator)")
            #expect(r.headers["content-range"] == nil)
            #expect(r.body == content)
        }

        // New content: new validators, and the old ones no longer select a range.
        let replaced = TestData.bytes(count: 8_000, seed: 12)
        server.serve("/a.bin", bytes: replaced)
        let second = try get(server, "/a.bin")
        #expect(second.body == replaced)
        #expect(second.headers["etag"] != etag)
        #expect(second.headers["last-modified"] != date)
        for old in [etag, date] {
            let r = try get(server, "/a.bin", ["Range": "bytes=100-", "If-Range": old])
            #expect(r.status == 200)
            #expect(r.body == replaced)
        }
        // An explicit ETag is sent as given (quotes added).
        server.serve("/b.bin", bytes: content, etag: "v1")
        #expect(try get(server, "/b.bin").headers["etag"] == "\"v1\"")
        #expect(try get(server, "/b.bin", ["Range": "bytes=1-", "If-Range": "\"v1\""]).status == 206)
    }

    @Test func keepAliveReusesConnectionsUntilClose() throws {
        let server = try FaultServer()
        server.serve("/a.bin", bytes: content)
        let client = try RawHTTPClient(port: server.port)
        let one = try client.request("GET", "/a.bin", headers: [("Range", "bytes=0-99")])
        #expect(one.status == 206 && one.body == slice(0...99) && one.end == .complete)
        #expect(one.headers["connection"] == "keep-alive")
        let two = try client.request("GET", "/a.bin")
        #expect(two.body == content && two.end == .complete)
        let three = try client.request("GET", "/a.bin", headers: [("Connection", "close")])
        #expect(three.headers["connection"] == "close")
        #expect(three.body == content)
        #expect(client.readUntilClose(timeout: 3).closed)

        // HTTP/1.0 keeps the connection only when asked to.
        let old = try RawHTTPClient(port: server.port)
        let a = try old.request("GET", "/a.bin", headers: [("Connection", "keep-alive")], version: "HTTP/1.0")
        #expect(a.headers["connection"] == "keep-alive")
        let b = try old.request("GET", "/a.bin", version: "HTTP/1.0")
        #expect(b.headers["connection"] == "close" && b.body == content)
        #expect(old.readUntilClose(timeout: 3).closed)

        let log = server.waitForRequests(count: 5)
        try #require(log.count == 5)
        #expect(Set(log[0...2].map(\.connectionID)).count == 1)
        #expect(Set(log[3...4].map(\.connectionID)).count == 1)
        #expect(log[0].connectionID != log[3].connectionID)
    }

    // MARK: Faults that cut the body

    @Test func dropAtClosesAtTheAbsoluteOffset() throws {
        let server = try FaultServer()
        server.serve("/d.bin", bytes: content, fault: .dropAt(offset: 4000))
        let client = try RawHTTPClient(port: server.port)
        let full = try client.request("GET", "/d.bin")
        #expect(full.status == 200)
        #expect(full.headers["content-length"] == "10000")
        #expect(full.body == slice(0...3999))
        #expect(full.end == .closedEarly)

        let fromMiddle = try get(server, "/d.bin", ["Range": "bytes=1000-"])
        #expect(fromMiddle.status == 206)
        #expect(fromMiddle.headers["content-range"] == "bytes 1000-9999/10000")
        #expect(fromMiddle.body == slice(1000...3999))
        let resumed = try RawHTTPClient(port: server.port).request("GET", "/d.bin", headers: [("Range", "bytes=4000-")])
        #expect(resumed.status == 206 && resumed.end == .complete)
        #expect(resumed.body == slice(4000...9999))
        let before = try RawHTTPClient(port: server.port).request("GET", "/d.bin", headers: [("Range", "bytes=0-999")])
        #expect(before.end == .complete && before.body == slice(0...999))

        let log = server.waitForRequests(count: 4)
        // Sorted: two complete keep-alive responses may be logged in either order.
        #expect(log.map(\.bodyBytesSent).sorted() == [1000, 3000, 4000, 6000])
        #expect(log.first?.bodyBytesSent == 4000)
        #expect(server.bytesSent(for: "/d.bin") == 14_000)
    }

    @Test func dropEveryCutsEachResponse() throws {
        let server = try FaultServer()
        server.serve("/e.bin", bytes: content, fault: .dropEvery(bytes: 1000))
        let first = try RawHTTPClient(port: server.port).request("GET", "/e.bin")
        #expect(first.body == slice(0...999) && first.end == .closedEarly)
        let middle = try RawHTTPClient(port: server.port).request("GET", "/e.bin", headers: [("Range", "bytes=5000-")])
        #expect(middle.body == slice(5000...5999) && middle.end == .closedEarly)
        let tail = try RawHTTPClient(port: server.port).request("GET", "/e.bin", headers: [("Range", "bytes=9500-")])
        #expect(tail.body == slice(9500...9999) && tail.end == .complete)
    }

    @Test func stallAndTruncatedKeepAliveLeaveTheConnectionOpen() throws {
        let server = try FaultServer()
        server.serve("/s.bin", bytes: content, fault: .stall(afterBytes: 3000))
        server.serve("/t.bin", bytes: content, fault: .truncatedKeepAlive(missing: 10))

        let stalled = try RawHTTPClient(port: server.port, timeout: 0.5)
        let s = try stalled.request("GET", "/s.bin")
        #expect(s.status == 200)
        #expect(s.headers["content-length"] == "10000")
        #expect(s.body == slice(0...2999))
        #expect(s.end == .timedOut)
        #expect(!stalled.readUntilClose(timeout: 0.3).closed)

        let truncated = try RawHTTPClient(port: server.port, timeout: 0.5)
        let t = try truncated.request("GET", "/t.bin")
        #expect(t.headers["content-length"] == "10000")
        #expect(t.body == slice(0...9989))
        #expect(t.end == .timedOut)
        #expect(!truncated.readUntilClose(timeout: 0.3).closed)
        // Neither response has ended, so neither is logged yet.
        #expect(server.requestCount == 0)

        // The stall ends when the client goes away, and is then logged.
        stalled.close()
        let log = server.waitForRequests(count: 1)
        #expect(log.first?.path == "/s.bin")
        #expect(log.first?.bodyBytesSent == 3000)

        // The stall counts body bytes of each response: a resumed response stalls again after
        // 3000 bytes, and one no longer than that is sent whole.
        let resumed = try RawHTTPClient(port: server.port, timeout: 0.3)
            .request("GET", "/s.bin", headers: [("Range", "bytes=3000-")])
        #expect(resumed.body == slice(3000...5999) && resumed.end == .timedOut)
        let rest = try RawHTTPClient(port: server.port).request("GET", "/s.bin", headers: [("Range", "bytes=7000-")])
        #expect(rest.body == slice(7000...9999) && rest.end == .complete)

        #expect(server.stop())
        #expect(truncated.readUntilClose(timeout: 3).closed)
        #expect(server.requests(for: "/t.bin").first?.bodyBytesSent == 9990)
    }

    @Test func trickleSendsSlowlyInSmallPieces() throws {
        let server = try FaultServer()
        let small = Array(content.prefix(1000))
        server.serve("/slow.bin", bytes: small, fault: .trickle(bytesPerSecond: 2000))
        server.serve("/fast.bin", bytes: small)
        let client = try RawHTTPClient(port: server.port)
        let fast = try client.request("GET", "/fast.bin")
        let start = Date()
        let slow = try client.request("GET", "/slow.bin")
        let elapsed = Date().timeIntervalSince(start)
        #expect(slow.body == small && slow.end == .complete)
        // 100-byte pieces 50 ms apart: many separate reads, and a lower bound on the time taken.
        #expect(slow.bodyReads >= 5, "body arrived in \(slow.bodyReads) reads")
        #expect(fast.bodyReads <= 2)
        #expect(elapsed >= 0.3, "1000 bytes at 2000 B/s took only \(elapsed) s")
        let ranged = try client.request("GET", "/slow.bin", headers: [("Range", "bytes=900-")])
        #expect(ranged.status == 206 && ranged.body == Array(small[900...]))
    }

    // MARK: Faults in headers and content

    @Test func ignoreRangeAlwaysSendsEverything() throws {
        let server = try FaultServer()
        server.serve("/i.bin", bytes: content, fault: .ignoreRange)
        let r = try get(server, "/i.bin", ["Range": "bytes=5000-"])
        #expect(r.status == 200)
        #expect(r.headers["content-range"] == nil)
        #expect(r.headers["accept-ranges"] == nil)
        #expect(r.headers["content-length"] == "10000")
        #expect(r.body == content)
    }

    @Test func lieContentRangeKinds() throws {
        let server = try FaultServer()
        let kinds: [(Fault.LieKind, String, [UInt8])] = [
            (.wrongStart, "bytes 1001-1999/10000", slice(1000...1999)),
            (.wrongEnd, "bytes 1000-1998/10000", slice(1000...1999)),
            (.wrongTotal, "bytes 1000-1999/11000", slice(1000...1999)),
            (.startsAtZero, "bytes 0-9999/10000", content),
        ]
        for (index, (kind, header, body)) in kinds.enumerated() {
            server.serve("/lie\(index).bin", bytes: content, fault: .lieContentRange(kind))
            let r = try get(server, "/lie\(index).bin", ["Range": "bytes=1000-1999"])
            #expect(r.status == 206, "\(kind)")
            #expect(r.headers["content-range"] == header, "\(kind)")
            #expect(r.headers["content-length"] == "\(body.count)", "\(kind)")
            #expect(r.body == body, "\(kind)")
            // Without a Range the answer is an honest 200.
            let plain = try get(server, "/lie\(index).bin")
            #expect(plain.status == 200 && plain.headers["content-range"] == nil && plain.body == content)
        }
    }

    @Test func extraBodyIsLongerThanTheFile() throws {
        let server = try FaultServer()
        server.serve("/x.bin", bytes: content, fault: .extraBody(100))
        let full = try RawHTTPClient(port: server.port).request("GET", "/x.bin")
        #expect(full.end == .complete)
        #expect(full.headers["content-length"] == "10100")
        #expect(full.body.count == 10_100)
        #expect(Array(full.body.prefix(10_000)) == content)
        #expect(full.body.suffix(100).allSatisfy { $0 == 0x5A })
        let ranged = try get(server, "/x.bin", ["Range": "bytes=9000-"])
        #expect(ranged.headers["content-range"] == "bytes 9000-9999/10000")
        #expect(ranged.headers["content-length"] == "1100")
        #expect(ranged.body.count == 1100)
        #expect(Array(ranged.body.prefix(1000)) == slice(9000...9999))
    }

    @Test func flipBytesChangesExactlyThoseOffsets() throws {
        let server = try FaultServer()
        server.serve("/f.bin", bytes: content, fault: .flipBytes(at: [0, 10, 9999]))
        func differences(_ body: [UInt8], from start: Int) -> [Int] {
            body.indices.filter { body[$0] != content[start + $0] }.map { $0 + start }
        }
        let full = try get(server, "/f.bin")
        #expect(full.body.count == 10_000)
        #expect(differences(full.body, from: 0) == [0, 10, 9999])
        #expect([0, 10, 9999].allSatisfy { full.body[$0] == content[$0] ^ 0xFF })
        let ranged = try get(server, "/f.bin", ["Range": "bytes=5-"])
        #expect(differences(ranged.body, from: 5) == [10, 9999])
        let clean = try get(server, "/f.bin", ["Range": "bytes=100-200"])
        #expect(clean.body == slice(100...200))
    }

    @Test func changeAfterServesNewContentWithNewValidators() throws {
        let server = try FaultServer()
        let other = TestData.bytes(count: 5000, seed: 13)
        server.serve("/c.bin", bytes: content, fault: .changeAfter(requests: 2, to: other))
        let one = try get(server, "/c.bin")
        let two = try get(server, "/c.bin", ["Range": "bytes=100-"])
        #expect(one.body == content)
        #expect(two.status == 206 && two.body == slice(100...9999))
        let oldTag = try #require(one.headers["etag"])
        let three = try get(server, "/c.bin", ["Range": "bytes=100-", "If-Range": oldTag])
        #expect(three.status == 200)
        #expect(three.body == other)
        #expect(three.headers["etag"] != oldTag)
        #expect(three.headers["last-modified"] != one.headers["last-modified"])
    }

    @Test func weakETagHasNoStrongValidator() throws {
        let server = try FaultServer()
        server.serve("/w.bin", bytes: content, fault: .weakETag)
        let r = try get(server, "/w.bin")
        let tag = try #require(r.headers["etag"])
        #expect(tag.hasPrefix("W/\"") && tag.hasSuffix("\""))
        #expect(r.headers["last-modified"] == nil)
        // Range alone still works; If-Range with the weak tag never matches.
        #expect(try get(server, "/w.bin", ["Range": "bytes=10-"]).status == 206)
        let resumed = try get(server, "/w.bin", ["Range": "bytes=10-", "If-Range": tag])
        #expect(resumed.status == 200 && resumed.body == content)
    }

    @Test func statusFaultThenSuccess() throws {
        let server = try FaultServer()
        server.serve("/busy.bin", bytes: content, fault: .status(code: 503, times: 2, retryAfter: "7"))
        for attempt in 1...2 {
            let r = try get(server, "/busy.bin")
            #expect(r.status == 503, "attempt \(attempt)")
            #expect(r.headers["retry-after"] == "7")
            #expect(String(decoding: r.body, as: UTF8.self).contains("503 Service Unavailable"))
        }
        let ok = try get(server, "/busy.bin")
        #expect(ok.status == 200 && ok.body == content)

        let date = FaultServer.httpDate(secondsSince1970: 1_900_000_000)
        #expect(date == "Sun, 17 Mar 2030 17:46:40 GMT")
        server.serve("/slow-down.bin", bytes: content, fault: .status(code: 429, times: 1, retryAfter: date))
        let limited = try get(server, "/slow-down.bin")
        #expect(limited.status == 429 && limited.headers["retry-after"] == date)
        #expect(try get(server, "/slow-down.bin").status == 200)

        server.serve("/error.bin", bytes: content, fault: .status(code: 500, times: 1, retryAfter: nil))
        let failed = try get(server, "/error.bin")
        #expect(failed.status == 500 && failed.headers["retry-after"] == nil)
        #expect(try get(server, "/error.bin").body == content)

        server.serve("/gone.bin", bytes: content, fault: .status(code: 404, times: .max, retryAfter: nil))
        server.serve("/denied.bin", bytes: content, fault: .status(code: 403, times: .max, retryAfter: nil))
        for _ in 0..<3 {
            #expect(try get(server, "/gone.bin").status == 404)
            #expect(try get(server, "/denied.bin").status == 403)
        }
    }

    @Test func redirectsCarryLocation() throws {
        let server = try FaultServer()
        let other = try FaultServer(host: "127.0.0.2")
        #expect(other.baseURL == "http://127.0.0.2:\(other.port)/")
        other.serve("/b.bin", bytes: content)
        server.serve("/to-other", bytes: [], fault: .redirect(to: other.url("/b.bin")))
        server.serve("/ftp", bytes: [], fault: .redirect(to: "ftp://127.0.0.1/x", status: 301))
        server.serve("/file", bytes: [], fault: .redirect(to: "file:///etc/passwd", status: 307))

        let r = try get(server, "/to-other")
        #expect(r.status == 302)
        let location = try #require(r.headers["location"])
        #expect(location == "http://127.0.0.2:\(other.port)/b.bin")
        let followed = try RawHTTPClient(host: "127.0.0.2", port: other.port).request("GET", "/b.bin")
        #expect(followed.body == content)
        #expect(other.waitForRequests(count: 1).first?.headers["host"] == "127.0.0.2:\(other.port)")

        let ftp = try get(server, "/ftp")
        #expect(ftp.status == 301 && ftp.headers["location"] == "ftp://127.0.0.1/x")
        let file = try get(server, "/file")
        #expect(file.status == 307 && file.headers["location"] == "file:///etc/passwd")
    }

    @Test func gzipHeaderOnFullAndPartialResponses() throws {
        let server = try FaultServer()
        server.serve("/g.bin", bytes: content, fault: .contentEncodingGzip)
        let full = try get(server, "/g.bin")
        #expect(full.headers["content-encoding"] == "gzip" && full.body == content)
        let ranged = try get(server, "/g.bin", ["Range": "bytes=50-"])
        #expect(ranged.status == 206)
        #expect(ranged.headers["content-encoding"] == "gzip" && ranged.body == slice(50...9999))
    }

    @Test func combinedFaultsApplyTogether() throws {
        let server = try FaultServer()
        server.serve("/m.bin", bytes: content, fault: .combined([.weakETag, .dropAt(offset: 100), .contentEncodingGzip]))
        let r = try RawHTTPClient(port: server.port).request("GET", "/m.bin")
        #expect(r.headers["etag"]?.hasPrefix("W/") == true)
        #expect(r.headers["content-encoding"] == "gzip")
        #expect(r.body == slice(0...99) && r.end == .closedEarly)
    }

    // MARK: Framing faults

    @Test func http10CloseDelimited() throws {
        let server = try FaultServer()
        server.serve("/h.bin", bytes: content, fault: .http10CloseDelimited)
        let client = try RawHTTPClient(port: server.port)
        let r = try client.request("GET", "/h.bin", headers: [("Range", "bytes=100-")])
        #expect(r.version == "HTTP/1.0")
        #expect(r.status == 200)
        #expect(r.headers["content-length"] == nil && r.headers["transfer-encoding"] == nil)
        #expect(r.end == .closeDelimited)
        #expect(r.body == content)
    }

    @Test func endlessBodyStopsWhenTheClientLeaves() throws {
        let server = try FaultServer()
        server.serve("/endless", bytes: [], fault: .endlessBody)
        let client = try RawHTTPClient(port: server.port)
        let r = try client.request("GET", "/endless", maxBody: 1_000_000)
        #expect(r.status == 200)
        #expect(r.headers["content-length"] == nil)
        #expect(r.end == .limitReached)
        #expect(r.body.count == 1_000_000)
        client.close()
        // Logged only when the sending loop has ended.
        let log = server.waitForRequests(count: 1, timeout: 10)
        #expect(log.first?.status == 200)
        #expect((log.first?.bodyBytesSent ?? 0) >= 1_000_000)
    }

    @Test func endless416AnswersRangesWithAnEndlessExplanationAndServesTheRestHonestly() throws {
        let server = try FaultServer()
        server.serve("/e.bin", bytes: content, fault: .endless416)
        let client = try RawHTTPClient(port: server.port)
        let r = try client.request("GET", "/e.bin", headers: [("Range", "bytes=100-")], maxBody: 1_000_000)
        #expect(r.status == 416)
        #expect(r.headers["content-range"] == "bytes */\(content.count)")
        #expect(r.headers["content-length"] == nil)
        #expect(r.end == .limitReached && r.body.count == 1_000_000)
        client.close()
        let whole = try RawHTTPClient(port: server.port).request("GET", "/e.bin")
        #expect(whole.status == 200 && whole.body == content)
    }

    @Test func noLengthIsChunkedAndHonest() throws {
        let server = try FaultServer()
        server.serve("/n.bin", bytes: content, fault: .noLength)
        let client = try RawHTTPClient(port: server.port)
        let r = try client.request("GET", "/n.bin", headers: [("Range", "bytes=100-")])
        #expect(r.status == 200)
        #expect(r.headers["transfer-encoding"] == "chunked" && r.headers["content-length"] == nil)
        #expect(r.end == .complete && r.body == content)
        // Chunked framing keeps the connection usable.
        let again = try client.request("GET", "/n.bin")
        #expect(again.body == content)
        let old = try RawHTTPClient(port: server.port).request("GET", "/n.bin", version: "HTTP/1.0")
        #expect(old.headers["transfer-encoding"] == nil && old.end == .closeDelimited && old.body == content)
        let log = server.waitForRequests(count: 3)
        #expect(log.count == 3)
        #expect(Set(log.filter { $0.version == "HTTP/1.1" }.map(\.connectionID)).count == 1)
    }

    // MARK: Lifecycle and robustness

    @Test func stopIsPromptDuringEndlessBodyStallAndTrickle() throws {
        let server = try FaultServer()
        server.serve("/endless", bytes: [], fault: .endlessBody)
        server.serve("/stall", bytes: content, fault: .stall(afterBytes: 10))
        server.serve("/short", bytes: content, fault: .truncatedKeepAlive(missing: 1))
        server.serve("/slow", bytes: content, fault: .trickle(bytesPerSecond: 10))

        // This client never reads, so the server ends up blocked in send().
        let endless = try RawHTTPClient(port: server.port, timeout: 0.3)
        try endless.sendRequest("GET", "/endless")
        var others: [RawHTTPClient] = []
        for path in ["/stall", "/short", "/slow"] {
            let client = try RawHTTPClient(port: server.port, timeout: 0.3)
            let r = try client.request("GET", path)
            #expect(r.end == .timedOut, "\(path)")
            others.append(client)
        }
        #expect(server.requestCount == 0)

        let start = Date()
        let finished = server.stop()
        let elapsed = Date().timeIntervalSince(start)
        #expect(finished, "threads still running after stop()")
        #expect(elapsed < 5, "stop() took \(elapsed) s")
        for client in [endless] + others {
            #expect(client.readUntilClose(timeout: 5).closed)
        }
        #expect(!Loopback.canConnect(port: server.port))
        let log = server.requests()
        #expect(Set(log.map(\.path)) == ["/endless", "/stall", "/short", "/slow"])
        #expect(log.first { $0.path == "/stall" }?.bodyBytesSent == 10)
        #expect(log.first { $0.path == "/short" }?.bodyBytesSent == 9999)
        #expect(server.stop())  // idempotent
    }

    @Test func deinitStopsTheServer() throws {
        var port = 0
        var client: RawHTTPClient?
        do {
            let server = try FaultServer()
            server.serve("/stall", bytes: content, fault: .stall(afterBytes: 5))
            port = server.port
            let c = try RawHTTPClient(port: port, timeout: 0.3)
            #expect(try c.request("GET", "/stall").body == slice(0...4))
            client = c
        }
        #expect(client?.readUntilClose(timeout: 5).closed == true)
        #expect(!Loopback.canConnect(port: port))
    }

    @Test func badRequestsGet400AndClose() throws {
        let server = try FaultServer()
        server.serve("/a.bin", bytes: content)
        let raw: [(String, Int)] = [
            ("GARBAGE\r\n\r\n", 400),
            ("GET /a.bin HTTP/1.1\r\n\r\n", 400),  // no Host
            ("GET /a.bin HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400),
            ("GET /a.bin HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n", 400),
            ("GET  /a.bin HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            ("GET /a.bin HTTP/2.0\r\nHost: a\r\n\r\n", 505),
            ("GET /a.bin HTTP/1.1\r\nHost: a\r\nX-Big: \(String(repeating: "a", count: 70_000))\r\n\r\n", 400),
        ]
        for (request, status) in raw {
            let client = try RawHTTPClient(port: server.port)
            try client.send(raw: Array(request.utf8))
            let r = try client.readResponse()
            #expect(r.status == status, "\(request.prefix(40).debugDescription)")
            #expect(r.headers["connection"] == "close")
            #expect(client.readUntilClose(timeout: 3).closed)
        }
        let client = try RawHTTPClient(port: server.port)
        try client.send(raw: Array("POST /a.bin HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc".utf8))
        let r = try client.readResponse()
        #expect(r.status == 405 && r.headers["allow"] == "GET, HEAD")
        // The request body was consumed: the connection still works.
        #expect(try client.request("GET", "/a.bin").body == content)
        // Bare-LF line ends are accepted.
        let lf = try RawHTTPClient(port: server.port)
        try lf.send(raw: Array("GET /a.bin HTTP/1.1\nHost: a\n\n".utf8))
        #expect(try lf.readResponse().body == content)
        #expect(server.waitForRequests(count: raw.count + 3).filter { $0.status == 400 }.count >= 6)
    }

    @Test func requestLogRecordsWhatHappened() throws {
        let server = try FaultServer()
        server.serve("/a.bin", bytes: content)
        let client = try RawHTTPClient(port: server.port)
        _ = try client.request("GET", "/a.bin?q=1", headers: [("X-Test", "Value"), ("Range", "bytes=10-19")])
        _ = try client.request("HEAD", "/a.bin")
        _ = try client.request("GET", "/nope")
        let log = server.waitForRequests(count: 3)
        try #require(log.count == 3)
        #expect(log[0].method == "GET" && log[0].path == "/a.bin" && log[0].version == "HTTP/1.1")
        #expect(log[0].headers["x-test"] == "Value")
        #expect(log[0].headers["host"] == "127.0.0.1:\(server.port)")
        #expect(log[0].rangeHeader == "bytes=10-19")
        #expect(log[0].status == 206 && log[0].bodyBytesSent == 10)
        #expect(log[1].method == "HEAD" && log[1].status == 200 && log[1].bodyBytesSent == 0 && log[1].rangeHeader == nil)
        #expect(log[2].path == "/nope" && log[2].status == 404 && log[2].bodyBytesSent > 0)
        #expect(Set(log.map(\.connectionID)).count == 1)
        #expect(server.requestCount == 3)
        #expect(server.bytesSent(for: "/a.bin") == 10)
        #expect(server.requests(for: "/nope").count == 1)
    }

    @Test func onlyLoopbackAddresses() throws {
        for host in ["0.0.0.0", "192.0.2.1", "localhost", "::", "2001:db8::1"] {
            #expect(throws: HarnessError.self, "\(host)") { try FaultServer(host: host) }
        }
    }

    @Test(.enabled(if: FaultServerTests.ipv6LoopbackAvailable, "::1 cannot be bound on this machine"))
    func servesOnIPv6Loopback() throws {
        let server = try FaultServer(host: "::1")
        #expect(server.baseURL == "http://[::1]:\(server.port)/")
        server.serve("/a.bin", bytes: content)
        let r = try RawHTTPClient(host: "::1", port: server.port).request("GET", "/a.bin", headers: [("Range", "bytes=1-")])
        #expect(r.status == 206 && r.body == slice(1...9999))
    }

    // MARK: With curl, an independent client

    private func curl(_ args: [String], timeout: Double = 20) throws -> ProcessResult {
        guard let path = Self.curlPath else { throw HarnessError("curl not installed") }
        // -q: ignore ~/.curlrc; --noproxy: never send loopback traffic to a proxy from the environment.
        return try ChildProcess.run(path, ["-q", "-sS", "--noproxy", "*"] + args, timeout: timeout)
    }

    @Test(.enabled(if: FaultServerTests.curlPath != nil, "curl not installed"))
    func curlResumesAfterADrop() throws {
        let server = try FaultServer()
        let dir = try TemporaryDirectory()
        server.serve("/d.bin", bytes: content, fault: .dropAt(offset: 4000))
        let out = dir.path("d.bin")
        let first = try curl(["-o", out, server.url("/d.bin")])
        #expect(first.exitCode == 18, "\(first)")  // CURLE_PARTIAL_FILE
        #expect(FileManager.default.contents(atPath: out).map { Array($0) } == slice(0...3999))
        let second = try curl(["-C", "-", "-o", out, server.url("/d.bin")])
        #expect(second.exitCode == 0, "\(second)")
        #expect(FileManager.default.contents(atPath: out).map { Array($0) } == content)
        let log = server.waitForRequests(count: 2)
        #expect(log.last?.rangeHeader == "bytes=4000-")
        #expect(log.last?.status == 206)
    }

    @Test(.enabled(if: FaultServerTests.curlPath != nil, "curl not installed"))
    func curlKeepAliveChunkedAndRedirects() throws {
        let server = try FaultServer()
        let other = try FaultServer(host: "127.0.0.2")
        let dir = try TemporaryDirectory()
        server.serve("/a.bin", bytes: content)
        server.serve("/n.bin", bytes: content, fault: .noLength)
        let reuse = try curl(["-o", dir.path("1"), server.url("/a.bin"), "-o", dir.path("2"), server.url("/n.bin")])
        #expect(reuse.exitCode == 0, "\(reuse)")
        #expect(FileManager.default.contents(atPath: dir.path("1")).map { Array($0) } == content)
        #expect(FileManager.default.contents(atPath: dir.path("2")).map { Array($0) } == content)
        let log = server.waitForRequests(count: 2)
        #expect(log.count == 2 && Set(log.map(\.connectionID)).count == 1)

        other.serve("/b.bin", bytes: content)
        server.serve("/to-other", bytes: [], fault: .redirect(to: other.url("/b.bin")))
        let followed = try curl(["-L", "-o", dir.path("3"), server.url("/to-other")])
        #expect(followed.exitCode == 0, "\(followed)")
        #expect(FileManager.default.contents(atPath: dir.path("3")).map { Array($0) } == content)

        server.serve("/loop-a", bytes: [], fault: .redirect(to: server.url("/loop-b")))
        server.serve("/loop-b", bytes: [], fault: .redirect(to: server.url("/loop-a")))
        let loop = try curl(["-L", "--max-redirs", "3", "-o", dir.path("4"), server.url("/loop-a")])
        #expect(loop.exitCode == 47, "\(loop)")  // CURLE_TOO_MANY_REDIRECTS
    }

    @Test(.enabled(if: FaultServerTests.curlPath != nil, "curl not installed"))
    func curlGivesUpOnTrickleAndStall() throws {
        let server = try FaultServer()
        let dir = try TemporaryDirectory()
        server.serve("/slow.bin", bytes: content, fault: .trickle(bytesPerSecond: 100))
        server.serve("/stall.bin", bytes: content, fault: .stall(afterBytes: 100))
        let slow = try curl(["--speed-limit", "1000", "--speed-time", "1", "-o", dir.path("s"), server.url("/slow.bin")])
        #expect(slow.exitCode == 28, "\(slow)")  // CURLE_OPERATION_TIMEDOUT
        let stalled = try curl(["--max-time", "1", "-o", dir.path("t"), server.url("/stall.bin")])
        #expect(stalled.exitCode == 28, "\(stalled)")
        #expect(FileManager.default.contents(atPath: dir.path("t")).map { Array($0) } == slice(0...99))
    }
}
