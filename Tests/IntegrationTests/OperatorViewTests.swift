import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// What a lab administrator meets on day 2: a server lost mid-run, a lock held by another run,
/// a wrong destination or manifest, a server that sends nothing.
@Suite(.serialized) struct OperatorViewTests {
    /// The server goes away in the middle of a run. The run stopped only because its
    /// sources became unreachable: exit 75 ("try again later"), as when it is down from the start,
    /// not 1 (before: exit 1, `result="failed"`, "... did not answer earlier in this run").
    @Test func losingTheServerMidRunIsTryAgainLater() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "2m"))
        try fx.addFile("big.bin", size: 40 << 20, seed: 1)
        for i in 0..<6 { try fx.addFile("clip\(i).bin", size: 3 << 20, seed: UInt64(10 + i)) }
        try fx.writeManifest()
        let run = try fx.startSync(["--json", "--segments", "1", "--jobs", "4"])
        // Mid-run: a partial file holds 2 MiB (of a 3 MiB clip or the 40 MiB big.bin).
        let partials = fx.destPath(".mirror/partial")
        try Wait.until("a partial file holds 2 MiB or the run ended", timeout: 60) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: partials)) ?? []
            return names.contains { fx.size(of: partials + "/" + $0) >= 2 << 20 } || !run.isRunning
        }
        fx.server.stop()
        let result = try run.wait(timeout: 120)
        #expect(result.exitCode == 75, "\(result)")
        let json = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any]
        #expect(json?["result"] as? String != "failed", "\(result.stdout)")
    }

    /// A run that finds the lock held (cron started it while a long run was going) leaves
    /// the last real run's metrics as they were and counts itself in `mirror_locked_runs_total`
    /// (before: `result="locked"`, `success 0`, and an alert on "no successful run" fired).
    @Test func aRunThatFindsTheLockHeldKeepsTheLastRealOutcome() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "1m"))
        try fx.addFile("a.bin", size: 1000, seed: 1)
        try fx.writeManifest()
        let metrics = fx.dir.path("mirror.prom")
        let first = try fx.sync(["--metrics-file", metrics])
        #expect(first.exitCode == 0, "\(first)")

        try fx.addFile("big.bin", size: 20 << 20, seed: 2)
        try fx.writeManifest()
        let long = try fx.startSync(["--segments", "1"])
        defer { long.signal(SIGKILL); _ = try? long.wait(timeout: 10) }
        try Wait.until("the long run's pid is in the lock file", timeout: 30) {
            SharedDestination.holder(of: fx.destPath(".mirror/lock")) == long.pid
        }
        for expected in 1...2 {
            let locked = try fx.sync(["--metrics-file", metrics])
            #expect(locked.exitCode == 75, "\(locked)")
            let samples = try PrometheusText.parse(try String(contentsOfFile: metrics, encoding: .utf8))
            #expect(PrometheusText.value(samples, "mirror_last_run_success") == 1, "the last real run succeeded")
            #expect(PrometheusText.value(samples, "mirror_last_run_result", having: ["result=\"ok\""]) == 1)
            #expect(PrometheusText.value(samples, "mirror_locked_runs_total") == Double(expected))
        }
    }

    /// Items 9 and 10: a file given as DEST, or a folder given as the manifest, is said in one line
    /// that names it, by sync (URL or path), its dry run, verify (once, not once per entry) and
    /// manifest create; the dry run stops as the run does (before: it listed every download, exit 0).
    @Test func aFileAsTheDestinationOrAFolderAsTheManifestIsSaidOnce() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-messages")
        let file = dir.path("afile")
        try TestData.writeFile(at: file, size: 3, seed: 1)
        var manifest = ManifestBuilder(baseURL: "http://127.0.0.1:1/")
        for i in 0..<20 { manifest.add(path: "f\(i).bin", size: 1, sha256: String(repeating: "ab", count: 32)) }
        try manifest.write(to: dir.path("m.yaml"))
        func run(_ args: [String]) throws -> ProcessResult {
            try Mirror.run(args, timeout: 60)
        }
        let said = "cannot use \(file) as the destination (it is a file, not a folder)"
        for args in [["sync", "http://127.0.0.1:1/m.yaml", "--dest", file], ["sync", dir.path("m.yaml"), "--dest", file],
                     ["sync", dir.path("m.yaml"), "--dest", file, "--dry-run"]] {
            let result = try run(args)
            #expect(result.exitCode == 73, "\(args): \(result)")
            #expect(result.stderr.hasPrefix("mirror: " + said), "\(args): \(result.stderr)")
            #expect(!result.stdout.contains("download"), "\(args): \(result.stdout)")
        }
        let verify = try run(["verify", dir.path("m.yaml"), "--dest", file])
        #expect(verify.exitCode == 1)
        #expect(verify.stderr.components(separatedBy: said).count == 2, "said once: \(verify.stderr)")
        let create = try run(["manifest", "create", file, "--base-url", "http://x/"])
        #expect(create.stderr.contains("cannot use \(file) as the folder to describe (it is a file, not a folder)"), "\(create.stderr)")
        let folder = try run(["sync", dir.path, "--dest", dir.path("d")])
        // Nothing read: 66 (EX_NOINPUT), not an invalid manifest's 65.
        #expect(folder.exitCode == 66, "\(folder)")
        #expect(folder.stderr.contains("\(dir.path): this is a folder, not a manifest file"), "\(folder.stderr)")
        // A manifest path that does not exist (a typo in a cron line) is 66 for every command that reads one.
        for command in [["sync"], ["status"], ["verify"]] {
            let missing = try run(command + [dir.path("no-such.yaml"), "--dest", dir.path("d")])
            #expect(missing.exitCode == 66, "\(command): \(missing)")
            #expect(missing.stderr.contains("no-such.yaml: cannot read manifest: No such file or directory"), "\(missing.stderr)")
        }
    }

    /// A server that takes every connection and sends nothing. Two stalls without a byte
    /// mark its host as not answering, like two refused connects: the run ends in seconds with
    /// exit 75 and says why (before: five retries of each file with back-offs, exit 1, 4 min 16 s
    /// with the defaults). On a terminal the wait between attempts shows "stalled, retrying in N s".
    @Test func aServerThatSendsNothingEndsTheRunSoonAndSaysSo() throws {
        let fx = try FaultFixture()
        for i in 0..<3 { fx.serve("s\(i).bin", size: 200_000, seed: UInt64(i + 1), fault: .stall(afterBytes: 0)) }
        let started = Date()
        let run = try fx.sync(["--json"], timeout: 120)
        let took = Date().timeIntervalSince(started)
        #expect(run.exitCode == 75, "\(run)")
        #expect(took < 20, "took \(took) s")
        #expect(run.stderr.contains("the server sent no data for 2 s after the connection opened (stalled)"), "\(run.stderr)")
        #expect(FaultFixture.json(run)?["reason"] as? String == "no source could be reached", "\(run.stdout)")

        let command = [try MirrorBinary.path(), "sync", fx.manifestPath, "--dest", fx.dest, "--stall-timeout", "2s", "--jobs", "1"]
            .map { "'" + $0 + "'" }.joined(separator: " ")
        let tty = try ChildProcess.run("/usr/bin/script", ["-q", "-e", "-c", command, "/dev/null"],
                                       environment: SyncFixture.loopbackOnly.merging(["TERM": "xterm"]) { $1 }, timeout: 120)
        #expect(tty.exitCode == 75, "\(tty)")
        #expect(tty.stdout.contains("stalled, retrying in "), "\(tty.stdout.debugDescription)")
    }
}
