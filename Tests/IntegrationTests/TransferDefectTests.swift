import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// Defects of the transfer layer and of placing files in DEST found by "Never a wrong file"
/// (issue 11: D2, D4, D6) and the local-attacker review (issue 17, item 3). Each test failed on
/// the build before its fix; docs/faults.md and SECURITY.md name them.
@Suite struct TransferDefectTests {
    static let mib = 1 << 20

    /// D2: a resume answered 416 with a body that never ends. The bytes keep coming, so the stall
    /// timeout never fires; only the cap on a body that is not the file's ends the response. The
    /// 416 then stands (the partial is not whole, so the next attempt asks for the whole file,
    /// which the server sends honestly).
    @Test func a416WithAnEndlessBodyIsCutAndTheFileFetchedWhole() throws {
        let fx = try FaultFixture()
        let bytes = TestData.bytes(count: 2 * Self.mib, seed: 3)
        fx.server.serve("/a.bin", bytes: bytes, fault: .stall(afterBytes: Int64(Self.mib)))
        fx.manifest.add(path: "a.bin", size: Int64(bytes.count), sha256: TestData.sha256(of: bytes))
        let run = try fx.start()
        let until = Date().addingTimeInterval(15)
        while fx.partialSize("a.bin") < Int64(Self.mib) && Date() < until && run.isRunning { usleep(5_000) }
        fx.server.serve("/a.bin", bytes: bytes, fault: .endless416)
        // Without the cap the run reads the 416's body until this timeout kills it.
        let result = try run.wait(timeout: 20)
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        let requests = fx.requestsInOrder(count: 3)
        #expect(requests.map(\.status) == [200, 416, 200], "\(requests)")
        #expect(requests.map(\.rangeHeader) == [nil, "bytes=\(Self.mib)-", nil], "\(requests)")
    }

    /// D4: a host whose connects time out (SYNs dropped) is unreachable, like one that refuses:
    /// after two such failures it is skipped for the rest of the run, and a run whose failures
    /// are all unreachable exits 75 at once instead of timing out every entry in turn.
    @Test func connectTimeoutsMarkTheHostUnreachableAndTheRunEnds75() throws {
        let hole = try UnansweredListener()
        let dir = try TemporaryDirectory(prefix: "mirror-d4")
        var manifest = ManifestBuilder(baseURL: "http://127.0.0.1:\(hole.port)/")
        for i in 0..<40 {
            manifest.add(path: "f\(i).bin", size: 1000, sha256: TestData.sha256(of: TestData.bytes(count: 1000, seed: UInt64(i))))
        }
        try manifest.write(to: dir.path("manifest.yaml"))
        let start = Date()
        // --stall-timeout also bounds a connect: 2 s here instead of 20.
        let result = try ChildProcess.run(try MirrorBinary.path(),
                                          ["sync", dir.path("manifest.yaml"), "--dest", dir.path("dest"),
                                           "--stall-timeout", "2s", "--retries", "1"],
                                          environment: SyncFixture.loopbackOnly, timeout: 30)
        let elapsed = Date().timeIntervalSince(start)
        #expect(result.exitCode == 75, "\(result)")
        #expect(elapsed < 20, "took \(elapsed) s")
        // Every failure is the dead host (exit 75 says so); the entries still waiting for their
        // retry when it was marked did not connect again.
        #expect(result.stderr.contains("did not answer earlier in this run"), "\(result.stderr)")
    }

    /// D6: a file where a folder of the entry's path should be. The entry is blocked before any
    /// request, in the dry run as in the real run, with a message naming what is in the way; it
    /// was downloaded whole on every run and then failed at the rename ("Not a directory").
    @Test func aFileWhereAParentFolderShouldBeBlocksTheEntryBeforeAnyRequest() throws {
        let fx = try SyncFixture()
        try fx.addFile("sub/g.bin", size: 200_000, seed: 1)
        let sha = try fx.addFile("fine.bin", size: 100, seed: 2)
        try fx.writeManifest()
        try FileManager.default.createDirectory(atPath: fx.dest, withIntermediateDirectories: true)
        try Data("in the way".utf8).write(to: URL(fileURLWithPath: fx.destPath("sub")))

        let dry = try fx.sync(["--dry-run"], timeout: 30)
        #expect(dry.exitCode == 0, "\(dry)")
        #expect(dry.stdout.contains("blocked sub/g.bin"), "\(dry.stdout)")
        #expect(dry.stdout.contains("download fine.bin"), "\(dry.stdout)")

        let real = try fx.sync([], timeout: 30)
        #expect(real.exitCode == 1, "\(real)")
        #expect(real.stderr.contains("sub/g.bin: "), "\(real.stderr)")
        #expect(real.stderr.contains(fx.destPath("sub") + " is a file, not a folder"), "\(real.stderr)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("fine.bin")) == sha)
        let requests = try fx.requests(atLeast: 1)
        #expect(!requests.contains { $0.uri.hasSuffix("/sub/g.bin") }, "\(requests)")
        #expect(try String(contentsOfFile: fx.destPath("sub"), encoding: .utf8) == "in the way", "the file in the way is left alone")
    }
}
