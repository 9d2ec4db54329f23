import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// `sync --dry-run --itemize` (docs/cli.md, "Itemized changes"): one line per change as
/// `ACTION REASON BYTES SOURCE PATH`, against nginx, and the bytes it lists add up to what the
/// real run then receives.
@Suite(.serialized) struct ItemizeTests {
    @Test func eachChangeIsOneLineAndTheBytesAreTheRealRuns() throws {
        let fx = try SyncFixture()
        try fx.addFile("keep.bin", size: 10_000, seed: 1)
        try fx.addFile("change me.bin", size: 20_000, seed: 2)
        try fx.addFile("old/moved.bin", size: 30_000, seed: 3)
        try fx.addFile("gone.bin", size: 4_000, seed: 4)
        try fx.addFile("images/a.iso", size: 5_000, seed: 5)
        try fx.writeManifest()
        let first = try fx.sync()
        try #require(first.exitCode == 0, "\(first)")

        // The publisher changes one file, moves one, drops one and adds one; the machine now
        // leaves images/ out and finds a file of its own at a listed path.
        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        fx.manifest.add(path: "keep.bin", size: 10_000, sha256: TestData.sha256(of: TestData.bytes(count: 10_000, seed: 1)))
        try fx.addFile("change me.bin", size: 21_000, seed: 12)
        try fx.addFile("new/moved.bin", size: 30_000, seed: 3)
        try fx.addFile("fresh.bin", size: 7_000, seed: 6)
        try fx.addFile("found.bin", size: 3_000, seed: 7)
        fx.manifest.add(path: "images/a.iso", size: 5_000, sha256: TestData.sha256(of: TestData.bytes(count: 5_000, seed: 5)))
        try fx.writeManifest()
        try Data(TestData.bytes(count: 3_000, seed: 7)).write(to: URL(fileURLWithPath: fx.destPath("found.bin")))

        let options = ["--delete", "--exclude", "images/", "--delete-excluded", "--max-delete", "10"]
        let dry = try fx.sync(options + ["--dry-run", "--itemize"])
        #expect(dry.exitCode == 0, "\(dry)")
        let base = fx.server.baseURL
        let lines = dry.stdout.split(separator: "\n").map(String.init)
        let items = lines.filter { !$0.hasPrefix("mirror:") }
        #expect(Set(items) == [
            "replace changed 21000 \(base)change%20me.bin change me.bin",
            "copy same-content 0 \(ItemizedChange.fileURL(fx.destPath("old/moved.bin"))) new/moved.bin",
            "download new 7000 \(base)fresh.bin fresh.bin",
            "check unverified 0 - found.bin",
            "delete unlisted 0 - gone.bin",
            "delete unlisted 0 - old/moved.bin",
            "delete excluded 0 - images/a.iso",
        ], "\(dry.stdout)")
        #expect(lines.last?.hasPrefix("mirror: dry run: ") == true, "\(dry.stdout)")
        let planned = items.compactMap { Int64($0.split(separator: " ")[2]) }.reduce(0, +)

        let real = try fx.sync(options + ["--json"])
        #expect(real.exitCode == 0, "\(real)")
        let received = try #require(FaultFixture.json(real)?["bytes_transferred"] as? Int, "\(real.stdout)")
        #expect(Int64(received) == planned, "itemized \(planned) bytes, the run received \(received)")
        #expect(!fx.exists(fx.destPath("images/a.iso")) && !fx.exists(fx.destPath("gone.bin")))

        let refused = try fx.sync(["--itemize"])
        #expect(refused.exitCode == 64 && refused.stderr.contains("--dry-run"), "\(refused)")
    }
}
