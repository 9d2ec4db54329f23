import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// Bytes this machine holds are never fetched again (docs/cli.md, "Reuse by content"): a kept
/// generation of an atomic DEST holds the older version of a file the journal's one record per
/// path no longer vouches for, and a publish back to the older manifest links it, with the origin
/// unreachable.
@Suite(.serialized) struct KeptSourceTests {
    @Test func aPublishBackLinksAKeptGenerationsBytesWithTheOriginDown() throws {
        let fx = try SyncFixture()
        try TestData.writeFile(at: fx.www + "/a.bin", size: 40_000, seed: 1)
        try TestData.writeFile(at: fx.www + "/b.bin", size: 40_000, seed: 2)
        let v1: [(String, Int, UInt64)] = [("a.bin", 40_000, 1), ("b.bin", 40_000, 2)]
        try OptionsMeetTests.publish(fx, v1)
        #expect(try fx.sync(["--atomic"]).exitCode == 0)
        try TestData.writeFile(at: fx.www + "/b.bin", size: 40_000, seed: 3)
        try OptionsMeetTests.publish(fx, [("a.bin", 40_000, 1), ("b.bin", 40_000, 3)])
        #expect(try fx.sync(["--atomic"]).exitCode == 0)

        // v1 again, from an origin nobody answers at.
        let port = try Loopback.freePort()
        fx.manifest = ManifestBuilder(baseURL: "http://127.0.0.1:\(port)/")
        for (path, size, seed) in v1 {
            fx.manifest.add(path: path, size: Int64(size), sha256: TestData.sha256(of: TestData.bytes(count: size, seed: seed)))
        }
        try fx.writeManifest()
        let back = try fx.sync(["--retries", "0"])
        #expect(back.exitCode == 0, "\(back)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("b.bin")) == TestData.sha256(of: TestData.bytes(count: 40_000, seed: 2)))
        #expect(!fx.exists(fx.dest + ".generations/building"), "a building folder was left")
        let again = try fx.sync(["--json"])
        #expect(again.exitCode == 0 && again.stdout.contains("\"up_to_date\":2"), "\(again)")
    }
}
