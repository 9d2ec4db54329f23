import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// The link emulator of the test support (``LinkProxy``): what it adds and how it breaks a
/// connection, checked against the fault server with the harness's own raw client (no libcurl),
/// and then `mirror` through it to a TLS origin (nginx, HTTP/1.1 and HTTP/2): a session cut
/// without `close_notify` is resumed and verified, a handshake that stalls is retried, and exit
/// 75 when it never completes. Only lower bounds of time are checked (what the link must at least
/// cost); how fast mirror is over a link is measured in `bench/`, never asserted here.
@Suite struct LinkProxyTests {
    static let body = TestData.bytes(count: 1 << 20, seed: 11)

    static func served() throws -> FaultServer {
        let server = try FaultServer()
        server.serve("/a.bin", bytes: body)
        return server
    }

    @Test func everyExchangeCostsTheRoundTripAndTheHandshakeOneMore() throws {
        let server = try Self.served()
        let proxy = try LinkProxy(to: server.port, link: .init(roundTrip: 0.2))
        let started = Date()
        let response = try Loopback.httpGet(port: proxy.port, path: "/a.bin")
        let took = Date().timeIntervalSince(started)
        #expect(response.status == 200 && response.body == Self.body)
        #expect(took >= 0.39, "a connection and one request over a 200 ms round trip took \(took) s")
        #expect(proxy.counts.accepted == 1 && proxy.counts.bytesDown > Int64(Self.body.count))
    }

    @Test func aConnectionCarriesNoMoreThanItsRate() throws {
        let server = try Self.served()
        let proxy = try LinkProxy(to: server.port, link: .init(bytesPerSecond: LinkProxy.Link.megabits(16)))
        let started = Date()
        let response = try Loopback.httpGet(port: proxy.port, path: "/a.bin")
        let took = Date().timeIntervalSince(started)
        #expect(response.body == Self.body)
        // 1 MiB at 2 MB/s: at least 0.52 s.
        #expect(took >= 0.5, "1 MiB at 16 Mbit/s took \(took) s")
    }

    @Test func aCutEndsTheBodyEarlyAndTheNextConnectionIsWhole() throws {
        let server = try Self.served()
        let proxy = try LinkProxy(to: server.port)
        proxy.breakNext(.cutAfter(bytes: 100_000))
        let cut = try Loopback.httpGet(port: proxy.port, path: "/a.bin")
        #expect(cut.status == 200 && cut.body.count < 100_000 && cut.body == Array(Self.body.prefix(cut.body.count)))
        let whole = try Loopback.httpGet(port: proxy.port, path: "/a.bin")
        #expect(whole.body == Self.body)
        #expect(proxy.counts.accepted == 2 && proxy.counts.broken == 1)
    }

    @Test func aResetIsAReset() throws {
        let server = try Self.served()
        let proxy = try LinkProxy(to: server.port)
        proxy.breakNext(.resetAfter(bytes: 100_000))
        #expect(throws: HarnessError.self) { try Loopback.httpGet(port: proxy.port, path: "/a.bin") }
    }

    @Test(arguments: [LinkProxy.Fault.stallAfter(bytes: 50_000), .stallHandshake])
    func aStallHoldsTheConnectionOpenUntilTheClientLeaves(fault: LinkProxy.Fault) throws {
        let server = try Self.served()
        let proxy = try LinkProxy(to: server.port)
        proxy.breakNext(fault)
        #expect(throws: HarnessError.self) { try Loopback.httpGet(port: proxy.port, path: "/a.bin", timeout: 1) }
        try Wait.until("the stalled connection ends once its client has gone", timeout: 10) { proxy.counts.open == 0 }
        #expect(proxy.counts.accepted == 1)
    }

    // MARK: - mirror through the link

    /// nginx serving over TLS (HTTP/2 where `http2`) behind a proxy, and a manifest of one file
    /// whose URL names the proxy.
    final class Scene {
        let ca: TLSTests.LabCA
        let fx: SyncFixture
        let proxy: LinkProxy
        let sha: String
        static let size = 4 << 20

        init(http2: Bool, link: LinkProxy.Link = .init()) throws {
            ca = try TLSTests.LabCA()
            let port = try Loopback.freePort()
            let ca = self.ca
            fx = try SyncFixture(nginxFor: { www in
                NginxServer.Options(extraHTTPConfig: ca.serverBlock(port: port, root: www, certificate: "right", http2: http2))
            })
            sha = try TestData.writeFile(at: fx.www + "/big.bin", size: Int64(Self.size), seed: 5)
            proxy = try LinkProxy(to: port, link: link)
            fx.manifest = ManifestBuilder(baseURL: "https://127.0.0.1:\(proxy.port)/")
            fx.manifest.add(path: "big.bin", size: Int64(Self.size), sha256: sha)
            try fx.writeManifest()
        }

        func sync(_ extra: [String] = []) throws -> ProcessResult {
            try fx.sync(["--ca-file", ca.caPEM] + extra)
        }
    }

    @Test(arguments: [false, true]) func aTLSSessionCutWithoutCloseNotifyIsResumedAndVerified(http2: Bool) throws {
        let scene = try Scene(http2: http2)
        scene.proxy.breakNext(.cutAfter(bytes: 1_500_000))
        let result = try scene.sync(["--json"])
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: scene.fx.destPath("big.bin")) == scene.sha)
        #expect(scene.proxy.counts.accepted >= 2 && scene.proxy.counts.broken == 1)
        let requests = try scene.fx.server.settledAccessLog(timeout: 10).filter { $0.uri == "/big.bin" }
        #expect(!requests.compactMap(\.rangeHeader).isEmpty, "the cut body was fetched again from the start: \(requests)")
        #expect(requests.allSatisfy { $0.httpProtocol == (http2 ? "HTTP/2.0" : "HTTP/1.1") }, "\(requests.map(\.httpProtocol))")
        let sent = FaultFixture.json(result)?["bytes_transferred"] as? Int ?? 0
        #expect(sent < Scene.size + 1_500_000, "received \(sent) bytes for a \(Scene.size)-byte file cut once")
    }

    @Test(arguments: [false, true]) func aStalledHandshakeIsRetried(http2: Bool) throws {
        let scene = try Scene(http2: http2)
        scene.proxy.breakNext(.stallHandshake)
        let result = try scene.sync(["--stall-timeout", "1s"])
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: scene.fx.destPath("big.bin")) == scene.sha)
        #expect(scene.proxy.counts.accepted >= 2)
    }

    @Test func aHandshakeThatNeverCompletesEndsInExit75() throws {
        let scene = try Scene(http2: true)
        scene.proxy.breakNext(.stallHandshake, connections: 1000)
        let result = try scene.sync(["--stall-timeout", "1s", "--retries", "1"])
        #expect(result.exitCode == 75, "\(result)")
        #expect(!scene.fx.exists(scene.fx.destPath("big.bin")))
        #expect((result.stdout + result.stderr).contains("127.0.0.1:\(scene.proxy.port)"), "\(result)")
    }
}
