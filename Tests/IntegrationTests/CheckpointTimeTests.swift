import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// A download is checkpointed every 8 MiB or every `PartialFile.checkpointSeconds`, whichever
/// comes first (docs/journal.md, "Checkpoint"): on a slow link a SIGKILL loses seconds of
/// download, not 8 MiB of it. nginx sends at 100 KB/s; the bound is set to 1 s for the test
/// (`MIRROR_TEST_CHECKPOINT_SECONDS`), where 30 s is the product's.
@Suite(.serialized) struct CheckpointTimeTests {
    @Test func aKillOnASlowLinkLosesSecondsNotEightMebibytes() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "100k"))
        try fx.addFile("slow.bin", size: 4 << 20, seed: 41)
        try fx.writeManifest()
        let run = try Mirror.start(["sync", fx.manifestPath, "--dest", fx.dest, "--segments", "1"],
                                   environment: ["MIRROR_TEST_CHECKPOINT_SECONDS": "1"])
        defer { run.signal(SIGKILL) }
        // What the journal holds as durable, as `status` reads it (it takes no lock).
        func durable() throws -> Int {
            let status = try Mirror.run(["status", fx.manifestPath, "--dest", fx.dest, "--json"])
            let json = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
            let entries = json?["entries"] as? [[String: Any]] ?? []
            return entries.first?["partial_bytes"] as? Int ?? 0
        }
        try Wait.until("the journal holds 300 KB of slow.bin", timeout: 60, detail: (try? run.currentStderr()) ?? "") {
            try durable() >= 300_000 || !run.isRunning
        }
        run.signal(SIGKILL)
        _ = try run.wait(timeout: 30)
        let kept = try durable()
        let sent = try fx.requests(atLeast: 1).first { $0.uri == "/slow.bin" }?.bodyBytesSent ?? -1
        print("SIGKILL at 100 KB/s: nginx sent \(sent) bytes, the journal keeps \(kept) as durable (\(sent - Int64(kept)) lost)")
        #expect(kept >= 300_000, "kept \(kept) of \(sent)")
        // At most about the bound's worth (1 s at 100 KB/s, and the pieces in flight) is lost.
        #expect(sent - Int64(kept) < 400_000, "lost \(sent - Int64(kept)) of \(sent)")
    }
}
