import Foundation
import Testing
import MirrorCore
import MirrorKit
import MirrorTestSupport

/// A fleet behind caches (docs/fleet.md): a cache on the way never keeps a machine on an old
/// manifest, and a manifest URL the server says is not there is an error, never the copy another
/// URL left (docs/manifest.md, "Remote manifests and the kept copy").
@Suite(.serialized) struct ManifestFreshnessTests {
    /// The manifest's origin lets caches keep what it serves for 60 days (`Cache-Control:
    /// max-age=5184000`), as a static file server configured for the big files would.
    static let sixtyDays = NginxServer.Options(extraLocationConfig: "expires 60d;")

    static func sync(_ url: String, dest: String, environment: [String: String] = SyncFixture.loopbackOnly,
                     _ extra: [String] = []) throws -> ProcessResult {
        try Mirror.run(["sync", url, "--dest", dest, "--stall-timeout", "2s"] + extra,
                 environment: environment, loopbackBypass: false, timeout: 90)
    }

    static func manifestField(_ result: ProcessResult, _ key: String) -> String? {
        (FaultFixture.json(result)?["manifest"] as? [String: Any])?[key] as? String
    }

    /// Through squid with a memory cache (`http_proxy`): v1 is cached fresh for 60 days, the origin
    /// publishes v2, and the next run gets v2 because its request asks squid to revalidate; a run
    /// after it, with nothing new, costs the origin a 304.
    @Test func aCachingForwardProxyNeverHidesANewManifest() throws {
        let squid = try SquidProxy(caching: true)
        let fx = try SyncFixture(nginx: Self.sixtyDays)
        try fx.addFile("a.bin", size: 20_000, seed: 71)
        let manifestFile = fx.www + "/manifest.yaml"
        try fx.manifest.write(to: manifestFile)
        let url = fx.server.url("manifest.yaml")
        let behind = ProxyTests.behind(["http_proxy": squid.url])

        let first = try Self.sync(url, dest: fx.dest, environment: behind)
        #expect(first.exitCode == 0, "\(first)")
        // What the test stands on: squid keeps v1 and answers for it without asking the origin.
        let seen = squid.requests(atLeast: 3).count
        let probe = try Loopback.httpGet(port: squid.port, path: url)
        #expect(probe.status == 200)
        let probed = squid.requests(atLeast: seen + 1).last
        #expect(probed?.url == url && probed?.result.contains("HIT") == true, "squid served v1 from its cache: \(String(describing: probed))")

        let sha = try fx.addFile("b.bin", size: 3_000, seed: 72)
        try fx.manifest.write(to: manifestFile)
        let second = try Self.sync(url, dest: fx.dest, environment: behind, ["--json"])
        #expect(second.exitCode == 0, "\(second)")
        #expect(Self.manifestField(second, "source") == "fetched", "\(second.stdout)")
        #expect(Self.manifestField(second, "sha256") == RemoteManifestTests.digest(manifestFile))
        #expect(RemoteManifestTests.digest(fx.destPath("b.bin")) == sha, "v2 is synced")

        let third = try Self.sync(url, dest: fx.dest, environment: behind, ["--json"])
        #expect(third.exitCode == 0, "\(third)")
        #expect(Self.manifestField(third, "source") == "not_modified", "\(third.stdout)")
        // squid passed mirror's validators on: the origin answered 304, not the manifest again.
        let origin = try fx.requests(atLeast: 7).filter { $0.uri == "/manifest.yaml" }
        #expect(origin.map(\.status) == [200, 200, 304], "\(origin)")
    }

    /// The documented nginx site cache (docs/fleet.md) as the manifest's URL: every manifest
    /// request carries `Cache-Control: no-cache` and `Pragma: no-cache`, so the cache asks the
    /// origin and v2 arrives although v1 was cached for 60 days.
    @Test func theSiteCacheNeverHidesANewManifest() throws {
        let fx = try SyncFixture(nginx: Self.sixtyDays)
        let cache = try SiteCache(origin: fx.server)
        try fx.addFile("a.bin", size: 20_000, seed: 73)
        let manifestFile = fx.www + "/manifest.yaml"
        try fx.manifest.write(to: manifestFile)
        let url = cache.url("manifest.yaml")

        let first = try Self.sync(url, dest: fx.dest)
        #expect(first.exitCode == 0, "\(first)")
        let sha = try fx.addFile("b.bin", size: 3_000, seed: 74)
        try fx.manifest.write(to: manifestFile)
        let second = try Self.sync(url, dest: fx.dest, ["--json"])
        #expect(second.exitCode == 0, "\(second)")
        #expect(Self.manifestField(second, "source") == "fetched", "\(second.stdout)")
        #expect(RemoteManifestTests.digest(fx.destPath("b.bin")) == sha, "v2 is synced")

        // nginx logs a request once it ends, which may be a moment after mirror exits. Without
        // --trust no signature is asked for.
        var asked: [SiteCache.Line] = []
        try Wait.until("the cache logged two manifest requests", timeout: 5, detail: "\(asked)") {
            asked = try cache.lines().filter { $0.uri == "/manifest.yaml" || $0.uri == "/manifest.yaml.sig" }
            return asked.count >= 2
        }
        #expect(asked.count == 2 && asked.allSatisfy { $0.uri == "/manifest.yaml" }, "\(asked)")
        #expect(asked.allSatisfy { $0.cacheControl == "no-cache" && $0.pragma == "no-cache" }, "\(asked)")

        // The site file serves manifests from a location without proxy_cache, which passes
        // mirror's validators on: nothing changed, so the origin answers 304, not the manifest.
        let before = try fx.server.accessLog().filter { $0.uri == "/manifest.yaml" }.count
        let third = try Self.sync(url, dest: fx.dest, ["--json"])
        #expect(Self.manifestField(third, "source") == "not_modified", "\(third.stdout)")
        try Wait.until("the origin logged the third manifest request", timeout: 5) {
            try fx.server.accessLog().filter { $0.uri == "/manifest.yaml" }.count > before
        }
        let statuses = try fx.server.accessLog().filter { $0.uri == "/manifest.yaml" }.map(\.status)
        #expect(statuses == [200, 200, 304], "the origin's answers to the three runs: \(statuses)")
    }

    /// A cron line with a mistyped URL on a machine that synced another: 404 (and 410) is exit 1
    /// naming the URL, every run, in the text, `--json`, the metrics and `status`; the copy kept for
    /// the other URL is never used (nor when the mistyped host cannot be reached), and is replaced
    /// once another URL's manifest is fetched.
    @Test func aMissingManifestIsAnErrorAndAnotherURLsCopyIsNeverUsed() throws {
        let fx = try SyncFixture(nginx: .init(extraServerConfig: "location = /gone.yaml { return 410; }"))
        try fx.addFile("a.bin", size: 5_000, seed: 75)
        try fx.manifest.write(to: fx.www + "/lab.yaml")
        let good = fx.server.url("lab.yaml")
        #expect(try Self.sync(good, dest: fx.dest).exitCode == 0)
        let kept = RemoteManifestTests.digest(fx.destPath(".mirror/manifest/last.yaml"))

        let typo = fx.server.url("lba.yaml")
        let metrics = fx.dir.path("mirror.prom")
        for _ in 0..<2 {
            let run = try Self.sync(typo, dest: fx.dest, ["--json", "--metrics-file", metrics])
            #expect(run.exitCode == 1, "\(run)")
            #expect(run.stderr.contains(typo) && run.stderr.contains("404"), "\(run.stderr)")
            #expect(!run.stderr.contains("last good copy ("), "no copy is used: \(run.stderr)")
            let object = FaultFixture.json(run)
            #expect(object?["result"] as? String == "failed", "\(run.stdout)")
            #expect(object?["exit_code"] as? Int == 1)
            #expect((object?["reason"] as? String)?.contains(typo) == true, "\(run.stdout)")
            let samples = try PrometheusText.parse(try String(contentsOfFile: metrics, encoding: .utf8))
            #expect(PrometheusText.value(samples, "mirror_last_run_result", having: ["result=\"manifest_not_found\""]) == 1)
            #expect(PrometheusText.value(samples, "mirror_last_run_exit_code") == 1)
        }
        let text = try Self.sync(typo, dest: fx.dest)
        #expect(text.exitCode == 1 && text.stderr.contains(typo), "\(text)")

        let status = try Mirror.run(["status", good, "--dest", fx.dest, "--json"], timeout: 60)
        let lastRun = FaultFixture.json(status)?["last_run"] as? [String: Any]
        #expect(lastRun?["result"] as? String == "failed", "\(status)")
        #expect((lastRun?["reason"] as? String)?.contains(typo) == true, "\(status.stdout)")
        let statusText = try Mirror.run(["status", good, "--dest", fx.dest], timeout: 60)
        #expect(statusText.stdout.contains("stopped: \(typo)"), "\(statusText)")

        let gone = try Self.sync(fx.server.url("gone.yaml"), dest: fx.dest)
        #expect(gone.exitCode == 1 && gone.stderr.contains("410"), "\(gone)")

        // A mistyped host: nothing answers, and the copy of lab.yaml is not this URL's.
        let nowhere = "http://127.0.0.1:\(try Loopback.freePort())/lab.yaml"
        let unreachable = try Self.sync(nowhere, dest: fx.dest)
        #expect(unreachable.exitCode == 75, "\(unreachable)")
        #expect(unreachable.stderr.contains("not of this URL"), "\(unreachable.stderr)")
        #expect(RemoteManifestTests.digest(fx.destPath(".mirror/manifest/last.yaml")) == kept, "the copy stays")

        // The manifest withdrawn from its own URL: an error too, not its copy.
        try FileManager.default.removeItem(atPath: fx.www + "/lab.yaml")
        let withdrawn = try Self.sync(good, dest: fx.dest)
        #expect(withdrawn.exitCode == 1 && withdrawn.stderr.contains(good), "\(withdrawn)")

        // Another URL fetched: its copy replaces the old one.
        try fx.manifest.write(to: fx.www + "/other.yaml")
        let other = fx.server.url("other.yaml")
        #expect(try Self.sync(other, dest: fx.dest).exitCode == 0)
        let validators = try String(contentsOfFile: fx.destPath(".mirror/manifest/last.validators"), encoding: .utf8)
        #expect(validators.contains("url\t\(other)\n"), "\(validators)")
    }
}
