import Foundation
import MirrorTestSupport
import Testing

/// How a run uses a distant link's connections (docs/cli.md, "Files, requests and connections"):
/// small files share one HTTP/2 connection per transfer thread, an HTTP/1.1 origin gets at most
/// `--connections`, and a large file's segments each take an HTTP/1.1 connection of their own,
/// but only while the run has fewer requests than `--segments`. nginx's access log tells which
/// connection (`$connection`) and protocol (`$server_protocol`) carried each request; the link
/// emulator (``LinkProxy``) counts the connections opened and open at once.
@Suite(.serialized) struct LinkUseTests {
    /// nginx over TLS (HTTP/2 offered where `http2`), `files` files of `size` bytes, and a
    /// manifest whose URLs name a ``LinkProxy`` in front of it.
    final class Scene {
        let ca: TLSTests.LabCA
        let fx: SyncFixture
        let proxy: LinkProxy
        var shas: [String: String] = [:]

        init(http2: Bool, files: Int, size: Int64, link: LinkProxy.Link) throws {
            ca = try TLSTests.LabCA()
            let port = try Loopback.freePort()
            let ca = self.ca
            fx = try SyncFixture(nginxFor: { www in
                NginxServer.Options(extraHTTPConfig: ca.serverBlock(port: port, root: www, certificate: "right", http2: http2))
            })
            proxy = try LinkProxy(to: port, link: link)
            fx.manifest = ManifestBuilder(baseURL: "https://127.0.0.1:\(proxy.port)/")
            for i in 0 ..< files {
                let name = String(format: "f%04d.bin", i)
                let sha = try TestData.writeFile(at: fx.www + "/" + name, size: size, seed: UInt64(i + 1))
                fx.manifest.add(path: name, size: size, sha256: sha)
                shas[name] = sha
            }
            try fx.writeManifest()
        }

        func sync(_ extra: [String] = []) throws -> ProcessResult {
            try fx.sync(["--ca-file", ca.caPEM] + extra)
        }

        func expectAllInstalled() throws {
            for (name, sha) in shas { #expect(try TestData.sha256(ofFileAt: fx.destPath(name)) == sha, "\(name)") }
        }

        func requests() throws -> [AccessLogEntry] {
            try fx.server.settledAccessLog(timeout: 10).filter { $0.uri.hasSuffix(".bin") }
        }
    }

    @Test func smallFilesShareOneHTTP2ConnectionPerTransferThread() throws {
        let scene = try Scene(http2: true, files: 300, size: 2048, link: .init(roundTrip: 0.02))
        let result = try scene.sync(["--transfer-threads", "2"])
        #expect(result.exitCode == 0, "\(result)")
        try scene.expectAllInstalled()
        let requests = try scene.requests()
        #expect(requests.count == 300)
        #expect(requests.allSatisfy { $0.httpProtocol == "HTTP/2.0" }, "\(Set(requests.map(\.httpProtocol)))")
        let connections = Set(requests.map(\.connection))
        #expect(connections.count <= 4, "two transfer threads opened \(connections.count) connections for 300 small files")
        #expect(scene.proxy.counts.accepted <= 4, "\(scene.proxy.counts)")
        #expect(requests.map(\.connectionRequests).max() ?? 0 >= 75, "the streams of one connection")
    }

    @Test func anHTTP1OriginGetsAtMostTheConnectionsAsked() throws {
        let scene = try Scene(http2: false, files: 200, size: 2048, link: .init(roundTrip: 0.02))
        let lowered = try scene.sync(["--connections", "4"])
        #expect(lowered.exitCode == 0, "\(lowered)")
        try scene.expectAllInstalled()
        #expect(Set(try scene.requests().map(\.connection)).count <= 4)
        #expect(scene.proxy.counts.mostOpen <= 4, "\(scene.proxy.counts)")

        try FileManager.default.removeItem(atPath: scene.fx.dest)
        let before = scene.proxy.counts
        let byDefault = try scene.sync()
        #expect(byDefault.exitCode == 0, "\(byDefault)")
        try scene.expectAllInstalled()
        let opened = scene.proxy.counts.accepted - before.accepted
        #expect(opened > 8 && opened <= 16, "the default ceiling is 16 connections to one host; \(opened) were opened")
        #expect(scene.proxy.counts.mostOpen <= 16, "\(scene.proxy.counts)")
    }

    @Test func aLargeFilesSegmentsTakeConnectionsOfTheirOwnFromAnHTTP2Origin() throws {
        // 5 MB/s a connection: the file's hash waits for bytes, and each segment adds throughput.
        let scene = try Scene(http2: true, files: 1, size: 24 << 20, link: .init(roundTrip: 0.01, bytesPerSecond: 5_000_000))
        let result = try scene.sync(["--segments-above", "8M"])
        #expect(result.exitCode == 0, "\(result)")
        try scene.expectAllInstalled()
        let requests = try scene.requests()
        #expect(requests.allSatisfy { $0.httpProtocol == "HTTP/1.1" && $0.rangeHeader != nil }, "\(requests)")
        let connections = Set(requests.map(\.connection))
        #expect(connections.count >= 3, "the segments shared \(connections.count) connection(s): \(requests)")
        #expect(scene.proxy.counts.mostOpen <= 8, "\(scene.proxy.counts)")
    }

    /// `--json` and the metrics file say what the run saw of the link: a round trip near the one
    /// the link adds, the connections opened, and the bytes a second.
    @Test func theRunReportsTheRoundTripAndThroughputItSaw() throws {
        let scene = try Scene(http2: true, files: 20, size: 64 << 10, link: .init(roundTrip: 0.08))
        let metrics = scene.fx.dir.path("mirror.prom")
        let result = try scene.sync(["--json", "--metrics-file", metrics])
        #expect(result.exitCode == 0, "\(result)")
        let link = try #require(FaultFixture.json(result)?["link"] as? [String: Any], "\(result.stdout)")
        let roundTrip = try #require(link["round_trip_ms"] as? Double)
        #expect(roundTrip >= 80 && roundTrip < 1000, "the link adds 80 ms: \(link)")
        #expect((link["connections"] as? Int ?? 0) >= 1, "\(link)")
        #expect((link["bytes_per_second"] as? Int ?? 0) > 0, "\(link)")
        let samples = try PrometheusText.parse(try String(contentsOfFile: metrics, encoding: .utf8))
        let seconds = try #require(PrometheusText.value(samples, "mirror_last_run_round_trip_seconds"))
        #expect(seconds >= 0.08 && seconds < 1, "\(seconds)")
        #expect((PrometheusText.value(samples, "mirror_last_run_connections_opened") ?? 0) >= 1)
        #expect((PrometheusText.value(samples, "mirror_last_run_receive_bytes_per_second") ?? 0) > 0)

        // A no-op run sends no request: no link to report.
        let again = try scene.sync(["--json"])
        #expect(again.exitCode == 0 && FaultFixture.json(again)?["link"] == nil, "\(again.stdout)")
    }

    @Test func largeFilesInFlightDoNotWidenPastTheSegments() throws {
        // Four large files and --segments 4: each already has a connection, so none takes more.
        let scene = try Scene(http2: false, files: 4, size: 8 << 20, link: .init(roundTrip: 0.01, bytesPerSecond: 5_000_000))
        let result = try scene.sync(["--segments-above", "4M", "--segments", "4"])
        #expect(result.exitCode == 0, "\(result)")
        try scene.expectAllInstalled()
        #expect(scene.proxy.counts.mostOpen <= 4, "four files in flight held \(scene.proxy.counts.mostOpen) connections at once")
    }
}
