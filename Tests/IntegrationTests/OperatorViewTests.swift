import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// What a lab administrator meets on day 2 (issue "The operator's view").
@Suite(.serialized) struct OperatorViewTests {
    /// Item 4: the server goes away in the middle of a run. The run stopped only because its
    /// sources became unreachable: exit 75 ("try again later"), as when it is down from the start,
    /// not 1 (before: exit 1, `result="failed"`, "... did not answer earlier in this run").
    @Test func losingTheServerMidRunIsTryAgainLater() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "2m"))
        try fx.addFile("big.bin", size: 40 << 20, seed: 1)
        for i in 0..<6 { try fx.addFile("clip\(i).bin", size: 3 << 20, seed: UInt64(10 + i)) }
        try fx.writeManifest()
        let run = try fx.startSync(["--json", "--segments", "1", "--jobs", "4"])
        usleep(1_500_000)
        fx.server.stop()
        let result = try run.wait(timeout: 120)
        #expect(result.exitCode == 75, "\(result)")
        let json = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any]
        #expect(json?["result"] as? String != "failed", "\(result.stdout)")
    }

    /// Item 12: a run that finds the lock held (cron started it while a long run was going) leaves
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
        usleep(800_000)
        for expected in 1...2 {
            let locked = try fx.sync(["--metrics-file", metrics])
            #expect(locked.exitCode == 75, "\(locked)")
            let samples = try PrometheusText.parse(try String(contentsOfFile: metrics, encoding: .utf8))
            #expect(PrometheusText.value(samples, "mirror_last_run_success") == 1, "the last real run succeeded")
            #expect(PrometheusText.value(samples, "mirror_last_run_result", having: ["result=\"ok\""]) == 1)
            #expect(PrometheusText.value(samples, "mirror_locked_runs_total") == Double(expected))
        }
    }
}
