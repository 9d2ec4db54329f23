import Foundation
import Testing
import MirrorCore
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A republish while a machine is mid-sync (docs/fleet.md, "A republish during a run"): the bytes
/// that arrive are the new version's, which the run's manifest does not describe. The run asks for
/// the manifest again, finds it changed, leaves the file for the next run (exit 75, no second
/// download, no "republish" advice), and the next run installs the new version.
@Suite(.serialized) struct RepublishDuringRunTests {
    static let mib: Int64 = 1 << 20

    @Test(arguments: [false, true]) func aRepublishDuringARunIsTryAgainLater(localManifest: Bool) throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "4m"))
        try fx.addFile("small.bin", size: 4096, seed: 1)
        try fx.addFile("big.bin", size: 8 * Self.mib, seed: 2)
        let manifestFile = localManifest ? fx.manifestPath : fx.www + "/manifest.yaml"
        try fx.manifest.write(to: manifestFile)
        let manifestArgument = localManifest ? manifestFile : fx.server.url("manifest.yaml")

        let run = try Mirror.start(["sync", manifestArgument, "--dest", fx.dest, "--segments", "1"])
        try Wait.until("big.bin is on its way") {
            let parts = (try? FileManager.default.contentsOfDirectory(atPath: fx.dest + "/.mirror/partial")) ?? []
            return parts.contains { fx.size(of: fx.dest + "/.mirror/partial/" + $0) >= Self.mib }
        }
        // The republish, in place: the end of big.bin rewritten (the running transfer reads it),
        // and the manifest that describes it.
        let fd = open(fx.www + "/big.bin", O_WRONLY)
        try #require(fd >= 0)
        let tail = [UInt8](repeating: 0x5a, count: Int(2 * Self.mib))
        try #require(pwrite(fd, tail, tail.count, off_t(6 * Self.mib)) == tail.count)
        close(fd)
        let newSHA = try TestData.sha256(ofFileAt: fx.www + "/big.bin")
        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        fx.manifest.add(path: "small.bin", size: 4096, sha256: try TestData.sha256(ofFileAt: fx.www + "/small.bin"))
        fx.manifest.add(path: "big.bin", size: 8 * Self.mib, sha256: newSHA)
        try fx.manifest.write(to: manifestFile + ".new")
        // nginx's ETag is the modification second and the size, both of which a republish within
        // the same second of the same length would keep: a publisher's clock moves on.
        var times = [timespec(tv_sec: time(nil) + 5, tv_nsec: 0), timespec(tv_sec: time(nil) + 5, tv_nsec: 0)]
        try #require(utimensat(AT_FDCWD, manifestFile + ".new", &times, 0) == 0)
        try #require(rename(manifestFile + ".new", manifestFile) == 0)

        let first = try run.wait(timeout: 120)
        #expect(first.exitCode == 75, "\(first)")
        #expect(first.stderr.contains("the manifest changed during the run"), "\(first.stderr)")
        #expect(!first.stderr.contains("republish"), "\(first.stderr)")
        let bigRequests = try fx.requestsSoFar().filter { $0.uri == "/big.bin" }
        #expect(bigRequests.count == 1, "big.bin was fetched again within the run: \(bigRequests)")

        let next = try Mirror.run(["sync", manifestArgument, "--dest", fx.dest], timeout: 120)
        #expect(next.exitCode == 0, "\(next)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("big.bin")) == newSHA)
    }

    /// A resume whose `If-Range` misses because the file was republished: the server sends the
    /// whole new file, which is cut at once, and the manifest is asked before anything is fetched
    /// again; it changed, so the file is left for the next run (exit 75). Before, the new file was
    /// taken whole within that response and only its digest showed the change.
    @Test func anIfRangeMissAsksTheManifestBeforeFetchingTheNewFile() throws {
        let fx = try FaultFixture()
        let size = 64 * Int(Self.mib)
        let old = TestData.bytes(count: size, seed: 4)
        let new = TestData.bytes(count: size, seed: 5)
        fx.server.serve("/a.bin", bytes: old, fault: .stall(afterBytes: 2 * Self.mib))
        fx.manifest.add(path: "a.bin", size: Int64(size), sha256: TestData.sha256(of: old))
        let run = try fx.start(["--segments", "1"])
        try Wait.until("a.bin's first 2 MiB are in its partial file", timeout: 30) {
            fx.partialSize("a.bin") >= 2 * Self.mib
        }
        // The republish: the file (new bytes, so a new ETag), then the manifest, renamed into place.
        fx.server.serve("/a.bin", bytes: new)
        var next = ManifestBuilder(baseURL: fx.server.baseURL)
        next.add(path: "a.bin", size: Int64(size), sha256: TestData.sha256(of: new))
        try next.write(to: fx.manifestPath + ".new")
        try #require(rename(fx.manifestPath + ".new", fx.manifestPath) == 0)

        let result = try run.wait(timeout: 60)
        #expect(result.exitCode == 75, "\(result)")
        #expect(result.stderr.contains("the manifest changed during the run"), "\(result.stderr)")
        let requests = fx.requestsInOrder(count: 2)
        let resume = try #require(requests.dropFirst().first)
        #expect(resume.headers["if-range"] != nil && resume.status == 200, "\(requests)")
        #expect(resume.bodyBytesSent < Int64(size), "the new file was cut, not taken: \(resume)")
        #expect(fx.server.requests(for: "/a.bin").count == 2, "nothing fetched after the cut: \(fx.server.requests())")
    }
}
