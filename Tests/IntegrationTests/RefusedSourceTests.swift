#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import MirrorTestSupport

/// A publisher's wrong checksum (docs/cli.md, "A file the server holds wrong"): the server holds
/// other bytes than the manifest lists. The first run fetches the file twice (the second time
/// asking caches to revalidate) and fails it; the source is remembered with its validator, so the
/// next runs ask with `If-None-Match` and download nothing while nginx answers 304. A new file on
/// the server, or a republished manifest, fetches again.
@Suite(.serialized) struct RefusedSourceTests {
    static func setMTime(_ path: String, _ seconds: Int) throws {
        var times = [timespec(tv_sec: seconds, tv_nsec: 0), timespec(tv_sec: seconds, tv_nsec: 0)]
        guard utimensat(AT_FDCWD, path, &times, 0) == 0 else { throw HarnessError.posix("utimensat \(path)") }
    }

    @Test func aFileRefusedOnceIsNotDownloadedAgainUntilTheServerChangesIt() throws {
        let fx = try SyncFixture()
        let wanted = TestData.bytes(count: 300_000, seed: 2)
        try fx.addFile("clip.bin", size: 300_000, seed: 1, listedSHA256: TestData.sha256(of: wanted))
        try fx.addFile("ok.bin", size: 1_000, seed: 3)
        try fx.writeManifest()
        try Self.setMTime(fx.www + "/clip.bin", 1_700_000_000)

        let first = try fx.sync()
        #expect(first.exitCode == 1 && first.stderr.contains("the server's file differs from the manifest"), "\(first)")
        let firstRequests = try fx.requestsSoFar().filter { $0.uri == "/clip.bin" }
        #expect(firstRequests.count == 2, "the premise: the first run fetches it twice: \(firstRequests)")
        #expect(fx.exists(fx.destPath(".mirror/refused")))

        for _ in 0..<2 {
            let before = try fx.requestsSoFar().count
            let again = try fx.sync(["--json"])
            #expect(again.exitCode == 1, "\(again)")
            #expect(again.stdout.contains("was refused on") && again.stdout.contains("not downloaded again"), "\(again)")
            let asked = try fx.requestsSoFar().dropFirst(before).filter { $0.uri == "/clip.bin" }
            #expect(asked.count == 1 && asked.first?.status == 304 && asked.first?.bodyBytesSent == 0, "\(asked)")
        }
        let metrics = fx.dir.path("m.prom")
        let counted = try fx.sync(["--metrics-file", metrics])
        #expect(counted.stdout.contains("1 failed (1 refused before, not downloaded again)"), "\(counted)")
        let samples = try PrometheusText.parse(try String(contentsOfFile: metrics, encoding: .utf8))
        #expect(PrometheusText.value(samples, "mirror_last_run_refused_files") == 1, "\(samples)")
        let status = try Mirror.run(["status", fx.manifestPath, "--dest", fx.dest], timeout: 60)
        #expect(status.stdout.contains("refused on"), "\(status)")

        // The publisher puts the right file up: a new validator, fetched, installed, forgotten.
        try TestData.writeFile(at: fx.www + "/clip.bin", size: 300_000, seed: 2)
        try Self.setMTime(fx.www + "/clip.bin", 1_700_000_100)
        let fixed = try fx.sync()
        #expect(fixed.exitCode == 0, "\(fixed)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("clip.bin")) == TestData.sha256(of: wanted))
        #expect(!fx.exists(fx.destPath(".mirror/refused")), "the refusal outlived the install")
    }

    /// A refusal stands a day: a server can change a file and keep its validator (size and
    /// modification time), so after that the file is fetched again (and refused again if wrong).
    @Test func aRefusalADayOldIsFetchedAgain() throws {
        let fx = try SyncFixture()
        try fx.addFile("clip.bin", size: 100_000, seed: 1, listedSHA256: TestData.sha256(of: TestData.bytes(count: 100_000, seed: 2)))
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 1)
        let file = fx.destPath(".mirror/refused")
        let text = try String(contentsOfFile: file, encoding: .utf8)
        let aged = text.replacingOccurrences(of: #"at=[0-9]+"#, with: "at=\(Int(Date().timeIntervalSince1970) - 90_000)",
                                             options: .regularExpression)
        #expect(aged != text)
        try aged.write(toFile: file, atomically: true, encoding: .utf8)
        #expect(chmod(file, 0o600) == 0)
        let before = try fx.requestsSoFar().count
        let again = try fx.sync()
        #expect(again.exitCode == 1 && again.stderr.contains("the same twice"), "fetched and refused anew: \(again)")
        let asked = try fx.requestsSoFar().dropFirst(before).filter { $0.uri == "/clip.bin" }
        #expect(asked.count == 2 && asked.allSatisfy { $0.status == 200 }, "\(asked)")
    }

    @Test func aRepublishedManifestFetchesTheFileAgain() throws {
        let fx = try SyncFixture()
        let served = try TestData.writeFile(at: fx.www + "/clip.bin", size: 200_000, seed: 1)
        fx.manifest.add(path: "clip.bin", size: 200_000, sha256: TestData.sha256(of: TestData.bytes(count: 200_000, seed: 9)))
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 1)
        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        fx.manifest.add(path: "clip.bin", size: 200_000, sha256: served)
        try fx.writeManifest()
        let republished = try fx.sync()
        #expect(republished.exitCode == 0, "\(republished)")
        #expect(!fx.exists(fx.destPath(".mirror/refused")))
    }
}
