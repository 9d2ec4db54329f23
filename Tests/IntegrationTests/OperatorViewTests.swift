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
}
