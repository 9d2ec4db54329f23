import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// `sync --dry-run` names what the run will really do (docs/cli.md, "Output", `--dry-run`): a
/// changed file with a chunk index is a delta, a renamed file a copy, and the dry run's byte total
/// is what the real run then receives, against nginx on the same DEST.
@Suite(.serialized) struct DryRunPlanTests {
    static let imageSize = 16 << 20

    /// Publishes `www` with chunk indexes for files above 1 MiB, as a publisher would.
    static func publish(_ fx: SyncFixture) throws {
        let run = try Mirror.run(
                           ["manifest", "create", fx.www, "--base-url", fx.server.baseURL, "--chunks",
                            "--chunks-above", "1M", "-o", fx.manifestPath], timeout: 120)
        #expect(run.exitCode == 0, "\(run)")
    }

    /// DEST holds v1 of a 16 MiB image and a 3 MiB video. The publisher edits 4 KiB of the image,
    /// inserts 256 KiB into it, moves the video and adds one new file at two paths: the dry run
    /// says `replace images/lab.img (delta, ≈…)`, `copy videos/2026/intro.mp4 from …` and `copy
    /// new/b.bin from …/new/a.bin`, fetches nothing but the image's chunk index, and its byte total
    /// equals the real run's `bytes_transferred` (the ranges, the index and one new file).
    @Test func theDryRunNamesADeltaAndACopyAndItsTotalIsTheRealRunsBytes() throws {
        let fx = try SyncFixture()
        let image = fx.www + "/images/lab.img"
        try TestData.writeFile(at: image, size: Int64(Self.imageSize), seed: 11)
        let videoSHA = try TestData.writeFile(at: fx.www + "/videos/intro.mp4", size: 3 << 20, seed: 12)
        try TestData.writeFile(at: fx.www + "/notes.txt", size: 1000, seed: 13)
        try Self.publish(fx)
        let first = try fx.sync()
        try #require(first.exitCode == 0, "\(first)")

        var v2 = [UInt8](try Data(contentsOf: URL(fileURLWithPath: image)))
        v2.replaceSubrange((3 << 20) ..< (3 << 20) + 4096, with: TestData.bytes(count: 4096, seed: 14))
        v2.insert(contentsOf: TestData.bytes(count: 256 << 10, seed: 15), at: 9 << 20)
        try Data(v2).write(to: URL(fileURLWithPath: image))
        try FileManager.default.createDirectory(atPath: fx.www + "/videos/2026", withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: fx.www + "/videos/intro.mp4", toPath: fx.www + "/videos/2026/intro.mp4")
        // One new content at two paths: fetched once, then copied.
        try TestData.writeFile(at: fx.www + "/new/a.bin", size: 200 << 10, seed: 16)
        try TestData.writeFile(at: fx.www + "/new/b.bin", size: 200 << 10, seed: 16)
        try Self.publish(fx)
        let beforeDry = try fx.requests(atLeast: 1).count

        let dry = try fx.sync(["--dry-run"])
        #expect(dry.exitCode == 0, "\(dry)")
        let lines = dry.stdout.split(separator: "\n").map(String.init)
        print(dry.stdout)
        #expect(lines.contains { $0.hasPrefix("replace images/lab.img (delta, ≈") }, "\(dry.stdout)")
        #expect(lines.contains("copy videos/2026/intro.mp4 from \(fx.destPath("videos/intro.mp4"))"), "\(dry.stdout)")
        #expect(lines.contains("download new/a.bin (200.0 KiB)"), "\(dry.stdout)")
        #expect(lines.contains("copy new/b.bin from \(fx.destPath("new/a.bin"))"), "\(dry.stdout)")
        let dryJSON = try fx.sync(["--dry-run", "--json"])
        let totals = try #require(FaultFixture.json(dryJSON)?["dry_run"] as? [String: Any], "\(dryJSON.stdout)")
        let plannedBytes = try #require(totals["bytes"] as? Int, "\(totals)")
        #expect(totals["files"] as? Int == 2 && totals["copies"] as? Int == 2 && totals["deltas"] as? Int == 1, "\(totals)")
        // The dry runs asked for the image's chunk index and nothing else; DEST is as it was.
        let dryRequests = Array(try fx.requests(atLeast: beforeDry + 2).dropFirst(beforeDry))
        #expect(dryRequests.allSatisfy { $0.uri == "/.mirror-chunks/images/lab.img" }, "\(dryRequests)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("videos/intro.mp4")) == videoSHA)
        #expect(!fx.exists(fx.destPath("videos/2026")))

        let real = try fx.sync(["--json"])
        #expect(real.exitCode == 0, "\(real)")
        let received = try #require(FaultFixture.json(real)?["bytes_transferred"] as? Int, "\(real.stdout)")
        print("dry run: \(plannedBytes) bytes planned; real run: \(received) bytes received, of a \(v2.count)-byte image")
        #expect(plannedBytes == received, "the dry run said \(plannedBytes) bytes, the run received \(received)")
        #expect(received > 0 && received < v2.count / 4, "\(received)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("images/lab.img")) == TestData.sha256(of: v2))
        #expect(try TestData.sha256(ofFileAt: fx.destPath("videos/2026/intro.mp4")) == videoSHA)
    }

    /// A changed file whose chunk index the server no longer has: the real run downloads it whole
    /// (with a warning), and so does the dry run's plan, which says why and counts it whole.
    @Test func aMissingChunkIndexIsPlannedAsAWholeDownload() throws {
        let fx = try SyncFixture()
        let image = fx.www + "/a.img"
        try TestData.writeFile(at: image, size: 4 << 20, seed: 21)
        try Self.publish(fx)
        try #require(try fx.sync().exitCode == 0)
        try TestData.writeFile(at: image, size: 4 << 20, seed: 22)
        try Self.publish(fx)
        try FileManager.default.removeItem(atPath: fx.www + "/.mirror-chunks/a.img")

        let dry = try fx.sync(["--dry-run", "--json"])
        #expect(dry.exitCode == 0, "\(dry)")
        let plan = try #require(FaultFixture.json(dry)?["plan"] as? [String], "\(dry.stdout)")
        #expect(plan.contains { $0.hasPrefix("replace a.img (4.0 MiB; no delta: chunk index ") && $0.contains("HTTP 404") }, "\(plan)")
        let totals = try #require(FaultFixture.json(dry)?["dry_run"] as? [String: Any], "\(dry.stdout)")
        let real = try fx.sync(["--json"])
        #expect(real.exitCode == 0, "\(real)")
        #expect(totals["bytes"] as? Int == FaultFixture.json(real)?["bytes_transferred"] as? Int, "\(totals) \(real.stdout)")
    }
}
