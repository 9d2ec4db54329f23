import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// `mirror sync URL --dest DIR`: the manifest fetched over HTTP (or file:), revalidated with the
/// validators of the last fetch, and the last good copy used when the server is down.
@Suite(.serialized) struct RemoteManifestTests {
    static func run(_ url: String, dest: String, _ extra: [String] = []) throws -> ProcessResult {
        try Mirror.run(["sync", url, "--dest", dest, "--stall-timeout", "2s"] + extra, timeout: 90)
    }

    static func digest(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { TestData.sha256(of: Array($0)) }
    }

    /// nginx serves the manifest gzip-encoded with an ETag and Last-Modified: the first run fetches
    /// it (200) and keeps it, without asking for its signature (no --trust), the second revalidates
    /// it (304) and sends no other request; credentials in the URL never show.
    @Test func aManifestURLIsKeptAndRevalidated() throws {
        let gzip = "location = /manifest.yaml { gzip on; gzip_types *; gzip_min_length 1; }"
        let fx = try SyncFixture(nginx: .init(extraServerConfig: gzip))
        let sha = try fx.addFile("data/a.bin", size: 200_000, seed: 1)
        for i in 0..<40 { try fx.addFile("data/small-\(i).txt", size: 100, seed: UInt64(10 + i)) }
        let manifestFile = fx.www + "/manifest.yaml"
        try fx.manifest.write(to: manifestFile)
        let signature = Array("not a real signature, just bytes to keep\n".utf8)
        try Data(signature).write(to: URL(fileURLWithPath: fx.www + "/manifest.yaml.sig"))
        let url = fx.server.url("manifest.yaml").replacingOccurrences(of: "http://", with: "http://ops:t0ps3cret@")

        let first = try Self.run(url, dest: fx.dest, ["--log-file", fx.dir.path("sync.log")])
        #expect(first.exitCode == 0, "\(first)")
        #expect(Self.digest(fx.destPath("data/a.bin")) == sha)
        #expect(Self.digest(fx.destPath(".mirror/manifest/last.yaml")) == Self.digest(manifestFile))
        #expect(Self.digest(fx.destPath(".mirror/manifest/last.yaml.sig")) == nil, "a signature kept without --trust")
        let manifestSize = fx.size(of: manifestFile)
        let fetches = try fx.requests(atLeast: 42).filter { $0.uri == "/manifest.yaml" }
        #expect(fetches.map(\.status) == [200])
        #expect(fetches.first.map { $0.bodyBytesSent < manifestSize } == true, "sent gzip-encoded")

        let second = try Self.run(url, dest: fx.dest, ["--log-file", fx.dir.path("sync.log")])
        #expect(second.exitCode == 0, "\(second)")
        #expect(second.stdout.isEmpty && second.stderr.isEmpty, "\(second)")
        let all = try fx.requests(atLeast: 43)
        #expect(all.filter { $0.uri == "/manifest.yaml" }.map(\.status) == [200, 304])
        #expect(!all.contains { $0.uri == "/manifest.yaml.sig" }, "a signature asked for without --trust")
        #expect(all.count == 43, "the second run asked only for the manifest: \(all.suffix(3))")

        let log = try String(contentsOfFile: fx.dir.path("sync.log"), encoding: .utf8)
        for text in [first.stdout, first.stderr, log, try String(contentsOfFile: fx.destPath(".mirror/manifest/last.validators"), encoding: .utf8)] {
            #expect(!text.contains("t0ps3cret"))
        }
        #expect(log.contains("not modified since the last fetch"))
    }

    /// A broken manifest at the URL: exit 65, and the last good copy stays as it was.
    @Test func anInvalidRemoteManifestKeepsTheLastGoodCopy() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 1000, seed: 2)
        let manifestFile = fx.www + "/manifest.yaml"
        try fx.manifest.write(to: manifestFile)
        let url = fx.server.url("manifest.yaml")
        #expect(try Self.run(url, dest: fx.dest).exitCode == 0)
        let kept = Self.digest(fx.destPath(".mirror/manifest/last.yaml"))
        #expect(kept != nil)

        try "version: 1\nfiles:\n  - path: ../escape\n    size: 1\n    sha256: 00\n".write(toFile: manifestFile, atomically: true, encoding: .utf8)
        let broken = try Self.run(url, dest: fx.dest)
        #expect(broken.exitCode == 65, "\(broken)")
        #expect(broken.stderr.contains(url), "the error names the URL: \(broken.stderr)")
        #expect(Self.digest(fx.destPath(".mirror/manifest/last.yaml")) == kept)
    }

    /// The server answers 503: the run syncs from the last good copy and says so; with no copy it
    /// exits 75 and creates nothing.
    @Test func anUnavailableServerFallsBackToTheLastGoodCopy() throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 5000, seed: 3)
        let yaml = Array(fx.manifest.yaml.utf8)
        fx.server.serve("/manifest.yaml", bytes: yaml)
        let url = fx.server.url("manifest.yaml").replacingOccurrences(of: "http://", with: "http://u:hush@")
        #expect(try Self.run(url, dest: fx.dest).exitCode == 0)
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))

        try FileManager.default.removeItem(atPath: fx.dest + "/a.bin")
        fx.server.serve("/manifest.yaml", bytes: yaml, fault: .status(code: 503, times: Int.max, retryAfter: nil))
        let offline = try Self.run(url, dest: fx.dest, ["--json"])
        #expect(offline.exitCode == 0, "\(offline)")
        #expect(offline.stderr.contains("using the last good copy"), "\(offline.stderr)")
        #expect(offline.stderr.contains("503"))
        #expect(!offline.stderr.contains("hush") && !offline.stdout.contains("hush"))
        #expect(FaultFixture.json(offline)?["result"] as? String == "ok", "the JSON still parses: \(offline.stdout)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes), "synced from the copy")

        let empty = fx.dir.path("other-dest")
        let none = try Self.run(url, dest: empty, ["--json"])
        #expect(none.exitCode == 75, "\(none)")
        #expect(none.stderr.contains("no last good copy"))
        let object = FaultFixture.json(none)
        #expect(object?["result"] as? String == "incomplete", "\(none.stdout)")
        #expect(object?["exit_code"] as? Int == 75)
        #expect((object?["reason"] as? String)?.contains("no last good copy") == true)
        #expect(!none.stderr.contains("hush"))
        #expect(!FileManager.default.fileExists(atPath: empty), "nothing created without a manifest")
    }

    /// A server that is not there at all (connection refused) is handled like a 503.
    @Test func aClosedPortFallsBackOrExits75() throws {
        let fx = try FaultFixture()
        fx.serve("a.bin", size: 100, seed: 4)
        fx.server.serve("/manifest.yaml", bytes: Array(fx.manifest.yaml.utf8))
        let url = fx.server.url("manifest.yaml")
        #expect(try Self.run(url, dest: fx.dest).exitCode == 0)
        #expect(fx.server.stop())
        let offline = try Self.run(url, dest: fx.dest)
        #expect(offline.exitCode == 0, "everything is in place from the copy: \(offline)")
        #expect(offline.stderr.contains("using the last good copy"))
        let none = try Self.run(url, dest: fx.dir.path("elsewhere"))
        #expect(none.exitCode == 75, "\(none)")
    }

    /// file: URLs work too (gzip detected by content), and a URL without --dest is a usage error.
    @Test func fileURLsAndTheMissingDest() throws {
        let fx = try SyncFixture()
        let sha = try fx.addFile("f.bin", size: 3000, seed: 5)
        try fx.writeManifest()
        let gz = fx.dir.path("manifest.yaml.gz")
        let gzip = try ChildProcess.run("/bin/sh", ["-c", "gzip -c < '\(fx.manifestPath)' > '\(gz)'"])
        #expect(gzip.exitCode == 0)
        let result = try Self.run("file://" + gz, dest: fx.dest)
        #expect(result.exitCode == 0, "\(result)")
        #expect(Self.digest(fx.destPath("f.bin")) == sha)
        let usage = try Mirror.run(["sync", fx.server.url("manifest.yaml")])
        #expect(usage.exitCode == 64, "\(usage)")
        #expect(usage.stderr.contains("--dest"))
    }
}

/// `--trust` with a manifest URL: the fetched manifest is checked against `<URL>.sig` before it is
/// used or saved; a refused one never replaces the last good copy, and no file is requested.
@Suite struct SignedRemoteManifestTests {
    @Test func aSignedRemoteManifestIsCheckedBeforeItIsUsedOrKept() throws {
        let keys = try TestKeys()
        let (privateKey, publicKey) = try keys.generateEd25519("lab")
        let fx = try SyncFixture()
        let sha = try fx.addFile("a.bin", size: 5000, seed: 3)
        let manifestFile = fx.www + "/manifest.yaml"
        try fx.manifest.write(to: manifestFile)
        let sign = try Mirror.run(["manifest", "sign", manifestFile, "--key", privateKey], timeout: 60)
        try #require(sign.exitCode == 0, "\(sign)")
        let url = fx.server.url("manifest.yaml")

        let good = try RemoteManifestTests.run(url, dest: fx.dest, ["--trust", publicKey])
        #expect(good.exitCode == 0, "\(good)")
        #expect(RemoteManifestTests.digest(fx.destPath("a.bin")) == sha)
        let kept = RemoteManifestTests.digest(fx.destPath(".mirror/manifest/last.yaml"))
        #expect(kept == RemoteManifestTests.digest(manifestFile))
        let before = try fx.requests(atLeast: 3).count

        // A compromised server swaps the manifest (one more file) but cannot sign it.
        try fx.addFile("evil.bin", size: 10, seed: 4)
        try fx.manifest.write(to: manifestFile)
        let refused = try RemoteManifestTests.run(url, dest: fx.dest, ["--trust", publicKey])
        #expect(refused.exitCode == 65, "\(refused)")
        #expect(refused.stderr.contains("signature"), "\(refused.stderr)")
        #expect(RemoteManifestTests.digest(fx.destPath(".mirror/manifest/last.yaml")) == kept, "the last good copy stays")
        #expect(!fx.exists(fx.destPath("evil.bin")))
        let after = try fx.requests(atLeast: before + 2).dropFirst(before)
        #expect(after.allSatisfy { $0.uri == "/manifest.yaml" || $0.uri == "/manifest.yaml.sig" }, "\(after)")

        // No signature at all on the server: refused too.
        try FileManager.default.removeItem(atPath: manifestFile + ".sig")
        let unsigned = try RemoteManifestTests.run(url, dest: fx.dest, ["--trust", publicKey])
        #expect(unsigned.exitCode == 65, "\(unsigned)")
    }
}
