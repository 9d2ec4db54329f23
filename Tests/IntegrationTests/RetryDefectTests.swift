import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// How a run spends its attempts when servers fail in ways that are nobody's fault but the
/// network's: a refusing host, a connection cut every megabyte, a resume on a mirror with another
/// validator, a doubled SIGTERM (docs/faults.md, rows D3, D5, D8).
@Suite(.serialized) struct RetryDefectTests {
    /// D3: thousands of entries against a port that refuses: the host is marked after two
    /// refusals, the rest are never asked, no partial file is created or left, no EMFILE even
    /// with a small descriptor limit, one "cannot reach" line, exit 75.
    @Test func aRefusingServerWithAManyEntryManifestEndsAtOnceWithNothingLeft() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-refused")
        let port = try Loopback.freePort()
        var manifest = ManifestBuilder(baseURL: "http://127.0.0.1:\(port)/")
        for i in 0..<2000 {
            manifest.add(path: "f/\(i).bin", size: 1000, sha256: String(repeating: "ab", count: 32))
        }
        try manifest.write(to: dir.path("m.yaml"))
        let mirror = try MirrorBinary.path()
        let result = try ChildProcess.run("/bin/sh", ["-c", "ulimit -n 256; exec \"$0\" sync \"$1\" --dest \"$2\"",
                                                      mirror, dir.path("m.yaml"), dir.path("dest")],
                                          environment: SyncFixture.loopbackOnly, timeout: 120)
        #expect(result.exitCode == 75, "\(result.stderr.suffix(2000))")
        #expect(!result.stderr.contains("Too many open files"))
        let lines = result.stderr.split(separator: "\n").filter { $0.contains("cannot reach http://127.0.0.1:\(port):") }
        #expect(lines.count == 1, "\(result.stderr.suffix(2000))")
        // Nothing failed on its content: the summary says the files were not reached.
        let summary = (result.stdout + result.stderr).split(separator: "\n").last { $0.contains("(stopped: no source could be reached") }
        #expect(summary.map { $0.contains(" not reached") && !$0.contains(" failed") } == true, "\(summary ?? "no summary line")")
        let partials = (try? FileManager.default.contentsOfDirectory(atPath: dir.path("dest/.mirror/partial"))) ?? []
        #expect(partials.isEmpty, "\(partials.count) partial files left")
        #expect(result.wallSeconds < 30)
    }

    /// D5: a server that closes every response after 1,000,000 bytes still delivers: each
    /// attempt's progress resets the count of failures (before: exit 1 after six attempts).
    @Test func aServerThatDropsEveryMegabyteStillDelivers() throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 9_000_000, fault: .dropEvery(bytes: 1_000_000))
        let result = try fx.sync(["--retries", "2", "--segments", "1"])
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
    }

    /// D8: a partial from `base_url`, which then answers 404 while a mirror with another ETag is
    /// alive: the mirror's 206 is used (no If-Range is sent to it; its validator is adopted), so
    /// only the missing bytes cross the network, and the digest check still covers the result.
    @Test func aResumeContinuesOnAMirrorWithAnotherValidator() throws {
        let primary = try FaultServer()
        let fx = try FaultFixture()
        let size = 6_000_000
        let bytes = TestData.bytes(count: size, seed: 7)
        primary.serve("/a.bin", bytes: bytes, fault: .stall(afterBytes: 3_000_000), etag: "\"primary\"")
        fx.server.serve("/a.bin", bytes: bytes, etag: "\"mirror\"")
        fx.manifest.baseURL = primary.baseURL
        fx.manifest.mirrors = [fx.server.baseURL]
        fx.manifest.add(path: "a.bin", size: Int64(size), sha256: TestData.sha256(of: bytes))
        let stopped = try fx.sync(["--segments", "1", "--deadline", "1.5s"])
        #expect(stopped.exitCode == 75, "\(stopped)")
        #expect(fx.partialSize("a.bin") >= 3_000_000)

        primary.serve("/a.bin", bytes: bytes, fault: .status(code: 404, times: 1000, retryAfter: nil), etag: "\"primary\"")
        let result = try fx.sync(["--segments", "1", "--retries", "0"])
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        let fromMirror = fx.server.waitForRequests(count: 1)
        #expect(fromMirror.count == 1)
        #expect(fromMirror.first?.rangeHeader != nil, "the mirror was asked for the missing bytes only")
        #expect((fromMirror.first?.bodyBytesSent ?? Int64(size)) <= Int64(size - 3_000_000))
    }

    /// A second SIGTERM within a second of the first (timeout(1) signals the child, then its
    /// group) still ends in a clean stop: a summary, a run record, exit 75.
    @Test func aDoubledSIGTERMStillStopsCleanly() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "1m"))
        try fx.addFile("a.bin", size: 20 << 20, seed: 3)
        try fx.writeManifest()
        let run = try fx.startSync(["--segments", "1"])
        let partial = fx.destPath(".mirror/partial/" + PartialFile.name(for: "a.bin"))
        try Wait.until("a.bin's partial file holds 1 MiB or the run ended", timeout: 60) {
            fx.size(of: partial) >= 1 << 20 || !run.isRunning
        }
        run.signal(SIGTERM)
        // The second signal once the first is delivered (a pending one would merge with it); the
        // clean stop takes longer than that.
        try Wait.until("the first SIGTERM was delivered", timeout: 10) { !ProcessState.hasPending(run.pid, SIGTERM) || !run.isRunning }
        run.signal(SIGTERM)
        let result = try run.wait(timeout: 30)
        #expect(result.signal == nil && result.exitCode == 75, "\(result)")
        #expect((result.stdout + result.stderr).contains("terminated (SIGTERM)"), "\(result)")
        let journal = try String(contentsOfFile: fx.dest + "/.mirror/journal", encoding: .utf8)
        #expect(journal.contains(" run "), "the run was recorded")
    }

    /// D3 for large files: a segmented partial is preallocated to the file's size before its first
    /// request; against a server that never answers, none may stay behind, holding the space.
    @Test func aRefusedLargeFileLeavesNoPreallocatedPartial() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-refused-large")
        let port = try Loopback.freePort()
        var manifest = ManifestBuilder(baseURL: "http://127.0.0.1:\(port)/")
        for i in 0..<3 { manifest.add(path: "big\(i).bin", size: 64 << 20, sha256: String(repeating: "ab", count: 32)) }
        try manifest.write(to: dir.path("m.yaml"))
        let result = try Mirror.run(["sync", dir.path("m.yaml"), "--dest", dir.path("dest"),
                              "--segments", "4", "--segments-above", "1M"], timeout: 60)
        #expect(result.exitCode == 75, "\(result)")
        let partials = (try? FileManager.default.contentsOfDirectory(atPath: dir.path("dest/.mirror/partial"))) ?? []
        #expect(partials.isEmpty, "\(partials.count) partial files left")
    }
}
