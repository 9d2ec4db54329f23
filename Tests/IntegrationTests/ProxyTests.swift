import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// `http_proxy`, `https_proxy` and `no_proxy` (docs/fleet.md), through a real forward proxy:
/// Debian's squid on loopback, in front of nginx.
@Suite struct ProxyTests {
    /// The environment of a machine behind `proxy`: the fixtures' loopback-only `no_proxy` is
    /// replaced by `noProxy`.
    static func behind(_ variables: [String: String], noProxy: String = "") -> [String: String] {
        var environment = variables
        environment["no_proxy"] = noProxy
        environment["NO_PROXY"] = noProxy
        return environment
    }

    @Test func httpProxySendsEveryRequestThroughTheProxyAndNoProxyBypassesIt() throws {
        let squid = try SquidProxy()
        let fx = try SyncFixture()
        let sha = try fx.addFile("a.bin", size: 200_000, seed: 61)
        try fx.addFile("b.bin", size: 3_000, seed: 62)
        try fx.writeManifest()

        let proxied = try Mirror.run(["sync", fx.manifestPath, "--dest", fx.dir.path("proxied")],
                               environment: Self.behind(["http_proxy": squid.url]), loopbackBypass: false, timeout: 60)
        #expect(proxied.exitCode == 0, "\(proxied)")
        #expect(try TestData.sha256(ofFileAt: fx.dir.path("proxied/a.bin")) == sha)
        let through = squid.requests(atLeast: 2).map { "\($0.method) \($0.url)" }.sorted()
        #expect(through == ["GET \(fx.server.url("a.bin"))", "GET \(fx.server.url("b.bin"))"], "\(through)")
        #expect(try fx.requests(atLeast: 2).count == 2, "squid passed both on to nginx")

        let direct = try Mirror.run(["sync", fx.manifestPath, "--dest", fx.dir.path("direct")],
                              environment: Self.behind(["http_proxy": squid.url], noProxy: "127.0.0.1"), loopbackBypass: false, timeout: 60)
        #expect(direct.exitCode == 0, "\(direct)")
        #expect(try fx.requests(atLeast: 4).count == 4)
        #expect(try squid.settledRequests().count == 2, "no_proxy named the host: squid saw nothing more")
    }

    /// An https:// source behind `https_proxy`: squid sees only a CONNECT tunnel, and TLS is still
    /// verified end to end with the origin (the lab CA through `--ca-file`).
    @Test func httpsProxyTunnelsAndTLSStaysVerified() throws {
        let squid = try SquidProxy()
        let scene = try TLSTests.Scene()
        try scene.useManifest(port: scene.rightPort)

        let result = try Mirror.run(
                              ["sync", scene.fx.manifestPath, "--dest", scene.fx.dest, "--ca-file", scene.ca.caPEM],
                              environment: Self.behind(["https_proxy": squid.url]), loopbackBypass: false, timeout: 60)
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: scene.fx.destPath("lab.bin")) == scene.sha)
        let through = squid.requests(atLeast: 1).map { "\($0.method) \($0.url)" }
        #expect(through == ["CONNECT 127.0.0.1:\(scene.rightPort)"], "\(through)")

        // Through the same tunnel, a certificate for another name is still refused.
        try scene.useManifest(port: scene.wrongPort)
        let refused = try Mirror.run(
                               ["sync", scene.fx.manifestPath, "--dest", scene.fx.dir.path("other"), "--retries", "0",
                                "--ca-file", scene.ca.caPEM],
                               environment: Self.behind(["https_proxy": squid.url]), loopbackBypass: false, timeout: 60)
        #expect(refused.exitCode == 1, "\(refused)")
        #expect((refused.stdout + refused.stderr).contains("TLS verification of 127.0.0.1:\(scene.wrongPort) failed"), "\(refused)")
        #expect(squid.requests(atLeast: 2).count == 2)
    }
}
