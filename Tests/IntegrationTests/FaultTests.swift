import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// Every fault of a dishonest server (docs/faults.md lists them with these tests). The invariant
/// in every row: at the manifest path there is the verified file or nothing; requests and time
/// are bounded (each run has a timeout); a failure names the path and the cause.
@Suite struct FaultTests {
    static let mib = 1 << 20

    // MARK: Broken connections

    @Test func aDroppedConnectionIsResumedWithinTheRun() throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 8 * Self.mib, fault: .dropAt(offset: 3 * Int64(Self.mib)))
        let result = try fx.sync()
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        let requests = fx.requestsInOrder(count: 2)
        #expect(requests.count == 2)
        #expect(requests.last?.rangeHeader == "bytes=\(3 * Self.mib)-")
    }

    @Test func aConnectionDroppingEveryMebibyteStillFinishes() throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 5 * Self.mib + 1000, fault: .dropEvery(bytes: Int64(Self.mib)))
        let result = try fx.sync()
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        #expect(fx.server.waitForRequests(count: 6).count == 6, "each attempt resumes where the last one dropped")
    }

    @Test func aStalledResponseIsCutByTheStallTimeoutAndResumed() throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 3 * Self.mib, fault: .stall(afterBytes: Int64(Self.mib)))
        let result = try fx.sync()
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        #expect(fx.requestsInOrder(count: 3).map(\.rangeHeader) == [nil, "bytes=\(Self.mib)-", "bytes=\(2 * Self.mib)-"])
    }

    /// A trickle (some bytes, too slowly) fails the entry after bounded retries (exit 1); a stall
    /// with not one byte counts as a server that cannot be reached: exit 75,
    /// the entry left for a later run, the stall named.
    @Test(arguments: [Fault.stall(afterBytes: 0), .trickle(bytesPerSecond: 300)])
    func aServerThatNeverDeliversFailsWithinBoundedRetries(fault: Fault) throws {
        let fx = try FaultFixture()
        fx.serve("a.bin", size: Self.mib, fault: fault)
        let result = try fx.sync(["--retries", "1"])
        let stalled = fault == .stall(afterBytes: 0)
        #expect(result.exitCode == (stalled ? 75 : 1), "\(result)")
        #expect(result.stderr.contains("a.bin: "), "\(result.stderr)")
        let said = stalled ? "(stalled)" : "too slow"
        #expect(result.stderr.lowercased().contains(said), "\(result.stderr)")
        #expect(fx.digest("a.bin") == nil)
        #expect(fx.server.requests().count <= 2, "--retries 1: two attempts, no more")
    }

    /// Content-Length promises more than is sent, and the connection stays open: the stall timeout
    /// ends the wait and the rest is fetched with a range request.
    @Test func aTruncatedBodyOnAKeptAliveConnectionIsResumed() throws {
        let fx = try FaultFixture()
        let size = 2 * Self.mib
        let bytes = TestData.bytes(count: size, seed: 1)
        // Truncated once, then the server recovers (same content, same ETag).
        fx.server.serve("/a.bin", bytes: bytes, fault: .truncatedKeepAlive(missing: 1000))
        fx.manifest.add(path: "a.bin", size: Int64(size), sha256: TestData.sha256(of: bytes))
        let run = try fx.start()
        try Wait.until("a.bin's partial file holds all but the missing 1000 bytes or the run ended", timeout: 20) {
            fx.partialSize("a.bin") >= Int64(size - 1000) || !run.isRunning
        }
        fx.server.serve("/a.bin", bytes: bytes)
        let result = try run.wait(timeout: 60)
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        #expect(fx.requestsInOrder(count: 2).last?.rangeHeader == "bytes=\(size - 1000)-")
    }

    // MARK: Ranges

    @Test func aServerIgnoringRangeIsTakenWhole() throws {
        let fx = try FaultFixture()
        let bytes = TestData.bytes(count: 4 * Self.mib, seed: 1)
        let result = try fx.stallThenServe("a.bin", bytes: bytes, at: 2 * Self.mib, fault: .ignoreRange)
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        // The resume asked for a range and got the whole file: taken as it came, from byte 0,
        // once the sync thread had the journal forget the old bytes and cut the file.
        let requests = fx.requestsInOrder(count: 2)
        let second = requests.dropFirst().first
        #expect(second?.rangeHeader == "bytes=\(2 * Self.mib)-" && second?.status == 200, "\(requests)")
        #expect(second?.bodyBytesSent == Int64(bytes.count) && fx.server.requestCount == 2, "\(requests)")
        // The cost is said, with its cause: the bytes already there are fetched again.
        #expect(result.stderr.contains("ignores range requests (it answered a resume with the whole file): files from it are "
                                       + "fetched again from their first byte (a.bin: "), "\(result.stderr)")
    }

    /// A 206 whose Content-Range is not the range asked for: refused before a byte is written, and
    /// the next attempt asks for the whole file (the lies apply to ranges only).
    @Test(arguments: [Fault.LieKind.wrongStart, .wrongEnd, .wrongTotal, .startsAtZero])
    func aLyingContentRangeIsRefusedAndTheFileFetchedWhole(lie: Fault.LieKind) throws {
        let fx = try FaultFixture()
        let bytes = TestData.bytes(count: 4 * Self.mib, seed: 1)
        let result = try fx.stallThenServe("a.bin", bytes: bytes, at: 2 * Self.mib, fault: .lieContentRange(lie))
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes), "no byte of the lying response reached the file")
        let requests = fx.requestsInOrder(count: 3)
        #expect(requests.map(\.rangeHeader) == [nil, "bytes=\(2 * Self.mib)-", nil], "after a lie, the whole file is asked for")
    }

    @Test func moreBodyThanTheManifestSaysIsRefused() throws {
        let fx = try FaultFixture()
        fx.serve("a.bin", size: 100_000, fault: .extraBody(1000))
        let result = try fx.sync()
        #expect(result.exitCode == 1, "\(result)")
        #expect(result.stderr.contains("a.bin: server has 101000 bytes but the manifest says 100000"), "\(result.stderr)")
        #expect(fx.digest("a.bin") == nil)
    }

    @Test func anEndlessBodyIsCutAtTheManifestSize() throws {
        let fx = try FaultFixture()
        fx.serve("a.bin", size: 100_000, fault: .endlessBody)
        let result = try fx.sync()
        #expect(result.exitCode == 1, "\(result)")
        #expect(result.stderr.contains("more than the manifest's 100000 bytes"), "\(result.stderr)")
        #expect(fx.digest("a.bin") == nil)
        #expect(fx.server.waitForRequests(count: 1).count == 1)
    }

    // MARK: Wrong content

    /// The same wrong bytes twice from one source are its content, not damage on the way: the
    /// retries stop after the second download and the message says what to do (before: three
    /// full downloads, "checksum mismatch after 3 attempts").
    @Test func corruptBytesAreCaughtAndTheSameWrongBytesTwiceEndTheRetries() throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 300_000, fault: .flipBytes(at: [12_345]))
        var wrong = bytes
        wrong[12_345] ^= 0xff
        let result = try fx.sync()
        #expect(result.exitCode == 1, "\(result)")
        #expect(result.stderr.contains("a.bin: the server's file differs from the manifest (expected sha256 \(TestData.sha256(of: bytes)), "
            + "got \(TestData.sha256(of: wrong)), the same twice from \(fx.server.url("/a.bin"))); republish the manifest or the file"),
                "\(result.stderr)")
        #expect(fx.digest("a.bin") == nil)
        let requests = fx.server.waitForRequests(count: 3, timeout: 1)
        #expect(requests.count == 2)
        // The second attempt asked caches to revalidate: the same wrong bytes then are the server's.
        #expect(requests.first?.headers["cache-control"] == nil, "\(requests)")
        #expect(requests.last?.headers["cache-control"] == "no-cache" && requests.last?.headers["pragma"] == "no-cache", "\(requests)")
    }

    /// The file changes on the server between attempts (new ETag): `If-Range` makes the server
    /// send the whole new file, and the download starts over instead of mixing two versions.
    /// The file changes on the server after a drop: the resume's `If-Range` misses and the server
    /// sends the whole new file as a 200, which is taken as it comes (the old bytes forgotten
    /// first), not cut and asked for again. The server drops that response at 2 MiB too, so the
    /// third request resumes the new file there: three requests, 6 MiB sent in all.
    @Test func contentChangingBetweenRequestsTakesTheWholeNewFile() throws {
        let fx = try FaultFixture()
        let stale = TestData.bytes(count: 4 * Self.mib, seed: 2)
        let fresh = TestData.bytes(count: 4 * Self.mib, seed: 3)
        fx.server.serve("/a.bin", bytes: stale, fault: .combined([.dropAt(offset: 2 * Int64(Self.mib)), .changeAfter(requests: 1, to: fresh)]))
        fx.manifest.add(path: "a.bin", size: Int64(fresh.count), sha256: TestData.sha256(of: fresh))
        let result = try fx.sync()
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: fresh))
        let requests = fx.requestsInOrder(count: 3)
        let second = try #require(requests.dropFirst().first)
        #expect(second.headers["if-range"] != nil && second.status == 200)
        let third = try #require(requests.dropFirst(2).first)
        #expect(third.rangeHeader == "bytes=\(2 * Self.mib)-" && third.status == 206, "the whole file was asked for again: \(requests)")
        #expect(fx.server.requestCount == 3, "\(requests)")
    }

    @Test func aWeakETagIsNotUsedAsAResumeValidator() throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 4 * Self.mib, fault: .combined([.dropAt(offset: 2 * Int64(Self.mib)), .weakETag]))
        let result = try fx.sync()
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        let second = fx.requestsInOrder(count: 2).last
        #expect(second?.rangeHeader != nil && second?.headers["if-range"] == nil)
    }

    // MARK: Status codes

    @Test func a503WithRetryAfterSecondsIsHonoured() throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 1000, fault: .status(code: 503, times: 1, retryAfter: "3"))
        let result = try fx.sync()
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        #expect(fx.server.waitForRequests(count: 2).count == 2)
        #expect(result.wallSeconds >= 2.9, "waited \(result.wallSeconds) s for Retry-After: 3 (own back-off is at most 1.5 s)")
    }

    @Test func a429WithRetryAfterAsAnHTTPDateIsHonoured() throws {
        let fx = try FaultFixture()
        let date = FaultServer.httpDate(secondsSince1970: Int(Date().timeIntervalSince1970) + 4)
        let bytes = fx.serve("a.bin", size: 1000, fault: .status(code: 429, times: 1, retryAfter: date))
        let result = try fx.sync()
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        #expect(result.wallSeconds >= 2.5, "waited \(result.wallSeconds) s for a date 4 s ahead")
    }

    @Test func a500ThenSuccessIsRetried() throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 1000, fault: .status(code: 500, times: 1, retryAfter: nil))
        let result = try fx.sync()
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        #expect(fx.server.waitForRequests(count: 2).count == 2)
    }

    @Test(arguments: [(404, "Not Found"), (403, "Forbidden")])
    func permanentStatusesFailAtOnce(code: Int, reason: String) throws {
        let fx = try FaultFixture()
        fx.serve("a.bin", size: 1000, fault: .status(code: code, times: Int.max, retryAfter: nil))
        let result = try fx.sync()
        #expect(result.exitCode == 1, "\(result)")
        #expect(result.stderr.contains("a.bin: server answered HTTP \(code) (\(reason))"), "\(result.stderr)")
        #expect(fx.digest("a.bin") == nil)
        #expect(fx.server.waitForRequests(count: 1).count == 1, "not retried")
    }

    // MARK: Redirects

    @Test func aRedirectToAnotherHostIsFollowed() throws {
        let other = try FaultServer(host: "127.0.0.2")
        let fx = try FaultFixture()
        let bytes = TestData.bytes(count: 50_000, seed: 5)
        other.serve("/real.bin", bytes: bytes)
        fx.server.serve("/a.bin", bytes: [], fault: .redirect(to: other.url("/real.bin")))
        fx.manifest.add(path: "a.bin", size: Int64(bytes.count), sha256: TestData.sha256(of: bytes))
        let result = try fx.sync()
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        #expect(other.waitForRequests(count: 1).count == 1)
    }

    @Test func aRedirectLoopFailsAfterFewRequests() throws {
        let fx = try FaultFixture()
        fx.server.serve("/a.bin", bytes: [], fault: .redirect(to: fx.server.url("/b.bin")))
        fx.server.serve("/b.bin", bytes: [], fault: .redirect(to: fx.server.url("/a.bin")))
        fx.manifest.add(path: "a.bin", size: 10, sha256: String(repeating: "a", count: 64))
        let result = try fx.sync()
        #expect(result.exitCode == 1, "\(result)")
        #expect(result.stderr.lowercased().contains("redirect"), "\(result.stderr)")
        #expect(fx.server.requests().count <= 6, "at most 5 redirects are followed")
        #expect(fx.digest("a.bin") == nil)
    }

    @Test(arguments: ["file:///etc/passwd", "ftp://127.0.0.1/a.bin"])
    func aRedirectToAForbiddenSchemeIsRefused(target: String) throws {
        let fx = try FaultFixture()
        fx.server.serve("/a.bin", bytes: [], fault: .redirect(to: target))
        fx.manifest.add(path: "a.bin", size: 10, sha256: String(repeating: "a", count: 64))
        let result = try fx.sync()
        #expect(result.exitCode == 1, "\(result)")
        #expect(result.stderr.contains("a.bin: "), "\(result.stderr)")
        #expect(result.stderr.lowercased().contains("protocol"), "\(result.stderr)")
        #expect(fx.digest("a.bin") == nil)
        #expect(!FileManager.default.fileExists(atPath: fx.dest + "/.mirror/partial/" + PartialFile.name(for: "a.bin"))
                || (try? FileManager.default.attributesOfItem(atPath: fx.dest + "/.mirror/partial/" + PartialFile.name(for: "a.bin"))[.size] as? Int) == 0)
    }

    // MARK: Encodings and framing

    @Test func aGzipContentEncodingIsRefused() throws {
        let fx = try FaultFixture()
        fx.serve("a.bin", size: 1000, fault: .contentEncodingGzip)
        let result = try fx.sync()
        #expect(result.exitCode == 1, "\(result)")
        #expect(result.stderr.contains("Content-Encoding gzip"), "\(result.stderr)")
        #expect(fx.digest("a.bin") == nil)
    }

    @Test func aGzipContentEncodingOnA206IsRefusedBeforeWriting() throws {
        let fx = try FaultFixture()
        let bytes = TestData.bytes(count: 4 * Self.mib, seed: 1)
        let result = try fx.stallThenServe("a.bin", bytes: bytes, at: 2 * Self.mib, fault: .contentEncodingGzip)
        #expect(result.exitCode == 1, "\(result)")
        #expect(result.stderr.contains("Content-Encoding gzip"), "\(result.stderr)")
        #expect(fx.digest("a.bin") == nil)
        #expect(fx.requestsInOrder(count: 2).last?.status == 206)
    }

    @Test(arguments: [Fault.http10CloseDelimited, .noLength])
    func bodiesWithoutContentLengthAreFine(fault: Fault) throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 3 * Self.mib, fault: fault)
        let result = try fx.sync()
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
    }

    // MARK: Mirrors

    @Test func aDeadBaseURLFallsBackToTheMirror() throws {
        let fx = try FaultFixture()
        let dead = try Loopback.freePort()
        let bytes = fx.serve("a.bin", size: 10_000)
        fx.manifest.baseURL = "http://127.0.0.1:\(dead)/"
        fx.manifest.mirrors = [fx.server.baseURL]
        let result = try fx.sync(["--json"])
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        let changed = (FaultFixture.json(result)?["changed"] as? [[String: Any]])?.first
        #expect(changed?["source"] as? String == fx.server.url("/a.bin"))
    }

    @Test func aMirrorServingACorruptCopyIsCaughtAndTheNextSourceUsed() throws {
        let bad = try FaultServer()
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 200_000)
        bad.serve("/a.bin", bytes: bytes, fault: .flipBytes(at: [100]))
        fx.manifest.baseURL = bad.baseURL
        fx.manifest.mirrors = [fx.server.baseURL]
        let result = try fx.sync()
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        #expect(result.stdout.contains("downloaded a.bin (195.3 KiB) from \(fx.server.url("/a.bin"))"), "\(result.stdout)")
        // The corrupt source is asked once more, with caches asked to revalidate (a cache on the
        // way may hold a damaged copy), before the next source (docs/fleet.md).
        let asked = bad.waitForRequests(count: 3, timeout: 1)
        #expect(asked.count == 2, "\(asked)")
        #expect(asked.map { $0.headers["cache-control"] ?? "-" } == ["-", "no-cache"], "\(asked)")
    }
}
