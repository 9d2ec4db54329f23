import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// What cron jobs and monitoring see of `mirror sync`: output without a terminal, `--json`,
/// `--metrics-file`, `--log-file`, `--limit-rate` and `--jitter`, against a real nginx on loopback.
@Suite(.serialized) struct OperationsTests {
    static let mib: Int64 = 1 << 20

    /// A run with one good and one corrupt file, not on a terminal: plain lines only (no escape
    /// sequence, no carriage return), the JSON names the source of the downloaded file, the
    /// metrics file parses and counts the states, the log has one line per event.
    @Test func aFailedRunIsReportedOnEveryChannelWithoutTerminalControls() throws {
        let fx = try SyncFixture()
        try fx.addFile("good.bin", size: 300_000, seed: 1)
        try fx.addFile("bad.bin", size: 5000, seed: 2, listedSHA256: String(repeating: "0", count: 64))
        try fx.writeManifest()
        let metrics = fx.dir.path("metrics/mirror.prom")
        try FileManager.default.createDirectory(atPath: fx.dir.path("metrics"), withIntermediateDirectories: true)
        let log = fx.dir.path("sync.log")

        let text = try fx.sync(["--metrics-file", metrics, "--log-file", log])
        #expect(text.exitCode == 1, "\(text)")
        #expect(text.stdout.contains("downloaded good.bin"))
        for output in [text.stdout, text.stderr] {
            #expect(!output.contains("\u{1B}"), "escape sequence without a terminal: \(output.debugDescription)")
            #expect(!output.contains("\r"), "carriage return without a terminal: \(output.debugDescription)")
        }

        let samples = try PrometheusText.parse(try String(contentsOfFile: metrics, encoding: .utf8))
        func value(_ name: String, _ having: String...) -> Double? { PrometheusText.value(samples, name, having: having) }
        #expect(value("mirror_last_run_result", #"result="failed""#) == 1)
        #expect(value("mirror_last_run_result", #"result="ok""#) == 0)
        #expect(value("mirror_last_run_success") == 0)
        #expect(value("mirror_last_run_exit_code") == 1)
        #expect(value("mirror_last_run_files", #"state="downloaded""#) == 1)
        #expect(value("mirror_last_run_files", #"state="failed""#) == 1)
        #expect(value("mirror_last_run_files", #"state="up_to_date""#) == 0)
        #expect(value("mirror_last_run_bytes_transferred").map { $0 >= 300_000 } == true)
        let start = try #require(value("mirror_last_run_start_timestamp_seconds"))
        let end = try #require(value("mirror_last_run_end_timestamp_seconds"))
        #expect(start > 1_600_000_000 && end >= start)
        #expect(samples.keys.allSatisfy { $0.contains("manifest=\"\(fx.manifestPath)\"") })
        #expect(try FileManager.default.contentsOfDirectory(atPath: fx.dir.path("metrics")) == ["mirror.prom"])

        // The rerun in JSON: the good file is up to date, the bad one fails again.
        let json = try fx.sync(["--json", "--log-file", log])
        #expect(json.exitCode == 1)
        let object = try #require(FaultFixture.json(json), "\(json.stdout)")
        #expect(object["result"] as? String == "failed")
        let failures = try #require(object["failures"] as? [[String: Any]])
        #expect(failures.map { $0["path"] as? String } == ["bad.bin"])

        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
        let pattern = try Regex(#"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z (info|warning|failed|error) (.+)$"#)
        for line in lines { #expect(line.wholeMatch(of: pattern) != nil, "\(line)") }
        #expect(lines.filter { $0.contains(" info start sync ") }.count == 2)
        #expect(lines.filter { $0.contains(" info downloaded good.bin (300000 bytes) from \(fx.server.url("good.bin"))") }.count == 1)
        #expect(lines.filter { $0.contains(" failed bad.bin: the server's file differs from the manifest") }.count == 2)
        #expect(lines.filter { $0.contains(" end result=failed") }.count == 2)
    }

    /// On a terminal (a pseudo-terminal from `script`), the progress block is drawn, and erased
    /// before the lines that follow it: after the last erase only plain lines remain.
    @Test func onATerminalTheProgressBlockIsDrawnThenErased() throws {
        let fx = try SyncFixture()
        try fx.addFile("slow.bin", size: 3 * Self.mib, seed: 7)
        try fx.writeManifest()
        let command = [try MirrorBinary.path(), "sync", fx.manifestPath, "--dest", fx.dest, "--limit-rate", "2M"]
            .map { "'" + $0 + "'" }.joined(separator: " ")
        let run = try ChildProcess.run("/usr/bin/script", ["-q", "-e", "-c", command, "/dev/null"],
                                       environment: SyncFixture.loopbackOnly.merging(["TERM": "xterm"]) { $1 }, timeout: 60)
        #expect(run.exitCode == 0, "\(run)")
        let erase = "\u{1B}[J"
        let drawn = run.stdout.components(separatedBy: erase)
        #expect(drawn.count >= 3, "the block was redrawn: \(run.stdout.debugDescription)")
        #expect(run.stdout.contains("total 0/1 files"))
        let after = try #require(drawn.last)
        #expect(!after.contains("total "), "the block is erased at the end: \(after.debugDescription)")
        #expect(after.contains("downloaded slow.bin (3.0 MiB)"))
        #expect(after.contains("mirror: 1 downloaded"))
    }

    /// `--json` lists each changed file with the URL that served it, credentials masked.
    @Test func theJSONSummaryNamesTheSourceOfEachFile() throws {
        let fx = try SyncFixture()
        try fx.addFile("a/one.bin", size: 10_000, seed: 3)
        let authority = fx.server.baseURL.replacingOccurrences(of: "http://", with: "http://reader:s3cret@")
        fx.manifest.baseURL = authority
        try fx.writeManifest()
        let result = try fx.sync(["--json"])
        #expect(result.exitCode == 0, "\(result)")
        #expect(!result.stdout.contains("s3cret") && !result.stderr.contains("s3cret"))
        let object = try #require(FaultFixture.json(result), "\(result.stdout)")
        let changed = try #require(object["changed"] as? [[String: Any]])
        #expect(changed.count == 1)
        #expect(changed.first?["path"] as? String == "a/one.bin")
        #expect(changed.first?["source"] as? String == fx.server.url("a/one.bin").replacingOccurrences(of: "http://", with: "http://***@"))
    }

    /// An invalid manifest still leaves a metrics file saying so (exit 65).
    @Test func anInvalidManifestIsInTheMetrics() throws {
        let fx = try SyncFixture()
        try "version: 2\nfiles: []\n".write(toFile: fx.manifestPath, atomically: true, encoding: .utf8)
        let metrics = fx.dir.path("mirror.prom")
        let result = try fx.sync(["--metrics-file", metrics])
        #expect(result.exitCode == 65, "\(result)")
        let samples = try PrometheusText.parse(try String(contentsOfFile: metrics, encoding: .utf8))
        #expect(PrometheusText.value(samples, "mirror_last_run_result", having: [#"result="invalid_manifest""#]) == 1)
        #expect(PrometheusText.value(samples, "mirror_last_run_exit_code") == 65)
    }

    /// The `dest` label is DEST's absolute path, however `--dest` spells it: one DEST, one series.
    @Test func theDestLabelIsTheAbsolutePath() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 100, seed: 1)
        try fx.writeManifest()
        let metrics = fx.dir.path("mirror.prom")
        let result = try Mirror.run(["sync", fx.manifestPath, "--dest", "./dest/.", "--metrics-file", metrics], cwd: fx.dir.path, timeout: 60)
        #expect(result.exitCode == 0, "\(result)")
        let text = try String(contentsOfFile: metrics, encoding: .utf8)
        let absolute = URL(fileURLWithPath: fx.dest).resolvingSymlinksInPath().path
        #expect(text.contains("dest=\"\(absolute)\""), "\(text)")
    }

    /// `--limit-rate 2M` on 8 MiB: the run cannot take less than about 4 s (a lower bound only).
    @Test func limitRateHoldsTheRunBelowTheRate() throws {
        let fx = try SyncFixture()
        let sha = try fx.addFile("big.bin", size: 8 * Self.mib, seed: 4)
        try fx.writeManifest()
        let result = try fx.sync(["--limit-rate", "2M"], timeout: 60)
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("big.bin")) == sha)
        #expect(result.wallSeconds >= 3, "8 MiB at 2 MiB/s took \(result.wallSeconds) s")
        print("measured: 8 MiB with --limit-rate 2M took \(result.wallSeconds) s")
    }

    @Test func jitterZeroRunsAndBadValuesAreUsageErrors() throws {
        let fx = try SyncFixture()
        try fx.addFile("x.bin", size: 1000, seed: 5)
        try fx.writeManifest()
        let ok = try fx.sync(["--jitter", "0"])
        #expect(ok.exitCode == 0, "\(ok)")
        #expect(fx.exists(fx.destPath("x.bin")))
        for bad in [["--jitter", "soon"], ["--jitter", "-5s"], ["--limit-rate", "0"], ["--limit-rate", "fast"]] {
            let result = try fx.sync(bad)
            #expect(result.exitCode == 64, "\(bad): \(result)")
        }
        let requests = try fx.requests(atLeast: 1)
        #expect(requests.count == 1, "usage errors send no request")
    }

    /// The deadline includes the jitter: a jitter far longer than the deadline ends with the
    /// deadline (exit 75) and fetches nothing.
    @Test func theDeadlineCountsTheJitter() throws {
        let fx = try SyncFixture()
        try fx.addFile("x.bin", size: 1000, seed: 8)
        try fx.writeManifest()
        let result = try fx.sync(["--jitter", "10h", "--deadline", "1s"], timeout: 60)
        #expect(result.exitCode == 75, "\(result)")
        #expect(result.stdout.contains("deadline passed"), "\(result.stdout)")
        #expect(!fx.exists(fx.destPath("x.bin")))
    }

    /// SIGTERM during a long jitter ends the run at once with 75, before any request.
    @Test func aSignalEndsTheJitterDelay() throws {
        let fx = try SyncFixture()
        try fx.addFile("x.bin", size: 1000, seed: 6)
        try fx.writeManifest()
        let run = try fx.startSync(["--jitter", "1h"])
        try Wait.until("the run sleeps out its jitter delay with SIGTERM caught, or ended", timeout: 30) {
            ProcessState.catches(run.pid, SIGTERM) && ProcessState.isInTimedSleep(run.pid) || !run.isRunning
        }
        run.signal(SIGTERM)
        let result = try run.wait(timeout: 10)
        #expect(result.exitCode == 75, "\(result)")
        #expect(result.stderr.contains("--jitter"))
        #expect(try fx.requestsSoFar().isEmpty)
    }
}
