import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// A manifest whose sizes are near 2^63 (one entry's, or several that add up past it) is refused
/// as invalid, exit 65, by every command that reads it, before anything under DEST changes:
/// before the bound (docs/manifest.md: a size and a manifest's total are at most 2^62), `sync`
/// trapped on an arithmetic overflow in the space check (exit 132, no metrics), and a remote
/// manifest's hostile copy, kept before the trap, crashed every later run that fell back to it.
@Suite struct HostileSizeTests {
    static let sha = String(repeating: "0", count: 64)

    static func manifest(_ sizes: [String], baseURL: String) -> String {
        (["version: 1", "base_url: \(baseURL)", "files:"] + sizes.enumerated().flatMap { i, size in
            ["  - path: f\(i).bin", "    size: \(size)", "    sha256: \(sha)"]
        }).joined(separator: "\n") + "\n"
    }

    @Test(arguments: [["9223372036854775807"], ["4611686018427387904", "4611686018427387904"], ["4611686018427387903", "2"]])
    func sizesNearTwoToTheSixtyThreeAreRefusedByEveryCommand(sizes: [String]) throws {
        let fx = try SyncFixture()
        try Data(Self.manifest(sizes, baseURL: fx.server.baseURL).utf8).write(to: URL(fileURLWithPath: fx.manifestPath))
        let metrics = fx.dir.path("mirror.prom")
        for command in [["sync", fx.manifestPath, "--dest", fx.dest, "--metrics-file", metrics],
                        ["sync", fx.manifestPath, "--dest", fx.dest, "--dry-run"],
                        ["verify", fx.manifestPath, "--dest", fx.dest],
                        ["status", fx.manifestPath, "--dest", fx.dest]] {
            let result = try Mirror.run(command, timeout: 60)
            #expect(result.exitCode == 65, "\(command.prefix(1)) \(sizes): \(result)")
            #expect(result.stderr.contains("2^62"), "\(command.prefix(1)): \(result.stderr)")
        }
        #expect(!fx.exists(fx.dest), "DEST was made")
        let text = (try? String(contentsOfFile: metrics, encoding: .utf8)) ?? ""
        #expect(PrometheusText.value((try? PrometheusText.parse(text)) ?? [:], "mirror_last_run_exit_code") == 65, "\(text)")
    }

    /// A remote manifest with such a size is refused and not kept: with the server gone, the next
    /// run finds no last good copy to fall back to (exit 75), where it used to crash on the copy.
    @Test func aHostileRemoteManifestIsNotKept() throws {
        let fx = try SyncFixture()
        try Data(Self.manifest(["9223372036854775807"], baseURL: fx.server.baseURL).utf8)
            .write(to: URL(fileURLWithPath: fx.www + "/m.yaml"))
        let url = fx.server.url("m.yaml")
        let first = try Mirror.run(["sync", url, "--dest", fx.dest], timeout: 60)
        #expect(first.exitCode == 65, "\(first)")
        fx.server.stop()
        let again = try Mirror.run(["sync", url, "--dest", fx.dest], timeout: 60)
        #expect(again.signal == nil && again.exitCode == 75 && again.stderr.contains("no last good copy"), "\(again)")
    }
}
