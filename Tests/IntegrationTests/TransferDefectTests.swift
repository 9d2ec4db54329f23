import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// Defects of the transfer layer and of placing files in DEST found by the random
/// sequence walk (SequenceTests) and the local-attacker review (SECURITY.md). Each test failed on
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
        try Wait.until("a.bin's partial file holds 1 MiB or the run ended", timeout: 15) {
            fx.partialSize("a.bin") >= Int64(Self.mib) || !run.isRunning
        }
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
        let result = try Mirror.run(
                              ["sync", dir.path("manifest.yaml"), "--dest", dir.path("dest"),
                               "--stall-timeout", "2s", "--retries", "1"], timeout: 30)
        let elapsed = Date().timeIntervalSince(start)
        #expect(result.exitCode == 75, "\(result)")
        // Two failures of any entries mark the host (the first jobs time out together), so the
        // run costs about one connect timeout, not one per entry.
        #expect(elapsed < 8, "took \(elapsed) s")
        #expect(result.stderr.contains("cannot reach http://127.0.0.1:\(hole.port)"), "\(result.stderr)")
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

    /// A process that can reach `.mirror/partial` loops
    /// `renameat2(RENAME_EXCHANGE)` between the partial and a symlink to /etc/passwd. Whatever the
    /// interleaving with the check and the rename in
    /// ``Destination/install(partial:from:to:syncFolder:expected:)``, the manifest path holds
    /// nothing or the verified file, never a link. Another user can no longer reach that folder
    /// (`.mirror` must be the runner's own and closed to others: ``LocalAttackerTests``), so the
    /// swapping runs as the same user here: the rename's own check is the defence under test.
    @Test(.enabled(if: SymlinkSwapAttacker.python != nil, "needs python3"))
    func aSymlinkSwappedInAtThePartialNameNeverReachesTheManifestPath() throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 256 * 1024, seed: 9)
        let sha = TestData.sha256(of: bytes)
        let first = try fx.sync([], timeout: 20)
        #expect(first.exitCode == 0, "\(first)")
        let partials = fx.dest + "/.mirror/partial"
        let attacker = try SymlinkSwapAttacker(folder: partials, name: PartialFile.name(for: "a.bin"))
        defer { attacker.stop() }

        var outcomes: [Int32: Int] = [:]
        var swapsAtTheRename = 0
        for round in 0..<200 {
            unlink(fx.dest + "/a.bin")
            attacker.rearm()
            let result = try fx.sync([], timeout: 20)
            #expect(result.signal == nil, "round \(round): \(result)")
            outcomes[result.exitCode, default: 0] += 1
            // Informational only (the old message, then the new one).
            if result.stderr.contains("swapped in while it was renamed") || result.stderr.contains("during the rename") { swapsAtTheRename += 1 }
            var st = stat()
            guard lstat(fx.dest + "/a.bin", &st) == 0 else { continue }
            let kind = st.st_mode & S_IFMT
            #expect(kind == S_IFREG, "round \(round): the manifest path is not a regular file (mode \(String(kind, radix: 8)))\n\(result)")
            if kind != S_IFREG { break }
            #expect(fx.digest("a.bin") == sha, "round \(round): wrong bytes at the manifest path")
        }
        #expect(attacker.isRunning, "the attacker died early: \(attacker.stderr)")
        #expect(outcomes[73] == nil, "the runs reached the install: \(outcomes)")
        print("symlink swap race: exit codes over 200 rounds: \(outcomes.sorted { $0.key < $1.key }); "
              + "\(swapsAtTheRename) swaps between the check and the rename")
    }
}

/// The local attacker (SECURITY.md): `python3`, exchanging the partial's
/// name with a symlink to /etc/passwd (`renameat2(RENAME_EXCHANGE)`, raw syscall through ctypes)
/// as fast as it can. ``rearm()`` puts the symlink back between runs: an exchange left half done
/// by a run leaves an old regular file under the attacker's name, which proves nothing.
final class SymlinkSwapAttacker {
    private let process: ChildProcess
    private let folder: String

    /// A `python3` on PATH.
    static let python: String? = lookup("python3")

    static func lookup(_ tool: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        return path.split(separator: ":").map { String($0) + "/" + tool }.first { access($0, X_OK) == 0 }
    }

    static let script = """
        import ctypes, os, sys
        libc = ctypes.CDLL(None, use_errno=True)
        nr = {"x86_64": 316, "aarch64": 276}[os.uname().machine]  # SYS_renameat2
        folder = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
        name = sys.argv[2].encode()
        while True:
            if libc.syscall(nr, folder, name, folder, b"evil", 2) != 0:  # RENAME_EXCHANGE
                os.sched_yield()
        """

    init(folder: String, name: String) throws {
        guard let python = Self.python else { throw HarnessError("no attacker runtime") }
        self.folder = folder
        process = try ChildProcess(python, ["-c", Self.script, folder, name])
    }

    /// Stops the attacker (SIGSTOP), makes `evil` a symlink to /etc/passwd again, and lets it go on.
    func rearm() {
        process.signal(SIGSTOP)
        let evil = folder + "/evil"
        var st = stat()
        if lstat(evil, &st) != 0 || (st.st_mode & S_IFMT) != S_IFLNK {
            unlink(evil)
            symlink("/etc/passwd", evil)
        }
        process.signal(SIGCONT)
    }

    var isRunning: Bool { process.isRunning }
    var stderr: String { (try? process.currentStderr()) ?? "" }

    func stop() {
        process.signal(SIGKILL)
        _ = try? process.wait(timeout: 5)
    }
}


extension TransferDefectTests {
    /// Found beside D2: a redirect whose body never ends. libcurl reads and drops a followed 3xx's
    /// body without handing it to the write callback, so only the progress callback can cut it;
    /// the entry moves on to the next source.
    @Test func aRedirectWithAnEndlessBodyIsCut() throws {
        let fx = try FaultFixture()
        let good = try FaultServer()
        let bytes = TestData.bytes(count: 300_000, seed: 4)
        good.serve("/a.bin", bytes: bytes)
        fx.server.serve("/a.bin", bytes: bytes, fault: .endlessRedirect(to: good.url("/a.bin")))
        fx.manifest.mirrors = [good.baseURL]
        fx.manifest.add(path: "a.bin", size: Int64(bytes.count), sha256: TestData.sha256(of: bytes))
        let result = try fx.sync([], timeout: 20)
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        #expect(result.wallSeconds < 10)
    }
}
