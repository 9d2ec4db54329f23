import Foundation
import Testing
import MirrorCore
import MirrorKit
import MirrorTestSupport

/// Symlinks (and hard links) planted under DEST, before a run and during one, never make `mirror`
/// write, truncate, chmod or delete anything outside DEST (docs/cli.md, "State on disk";
/// SECURITY.md). Each test fingerprints a canary tree outside DEST before and after the run, and
/// first asserts that the planted link really leads into the canary, so a `mirror` that followed
/// it would fail the test.
///
/// Every scenario runs twice: with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` and with the
/// `openat(O_NOFOLLOW)` walk that older kernels get (`MIRROR_RESOLVE_WALK`).
@Suite struct ConfinementTests {
    enum Resolver: String, CaseIterable, CustomTestStringConvertible {
        case openat2, walk
        var environment: [String: String] { self == .walk ? ["MIRROR_RESOLVE_WALK": "1"] : [:] }
        var testDescription: String { rawValue }
    }

    /// The entry that the planted links aim at, and the canary files that mirror its path.
    static let deepPath = "a/b/c/file.bin"
    static let canaryLayout = ["x/b/c/file.bin", "y/c/file.bin", "z/file.bin", "file.bin", "lone.bin"]

    final class Scene {
        let fx: SyncFixture
        let canary: CanaryTree
        let resolver: Resolver
        init(_ resolver: Resolver, nginx: NginxServer.Options = .init()) throws {
            self.resolver = resolver
            fx = try SyncFixture(nginx: nginx)
            canary = try CanaryTree(at: fx.dir.path("canary"), layout: ConfinementTests.canaryLayout)
            try FileManager.default.createDirectory(atPath: fx.dest, withIntermediateDirectories: true)
        }
        func sync(_ extra: [String] = []) throws -> ProcessResult {
            try Mirror.run(["sync", fx.manifestPath, "--dest", fx.dest] + extra,
                     environment: resolver.environment, timeout: 120)
        }
        func start(_ extra: [String] = []) throws -> ChildProcess {
            try Mirror.start(["sync", fx.manifestPath, "--dest", fx.dest] + extra,
                             environment: resolver.environment)
        }
        func plant(_ relative: String, to target: String) throws {
            let path = fx.destPath(relative)
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            guard symlink(target, path) == 0 else { throw HarnessError.posix("symlink \(path)") }
        }
    }

    /// Where a link at each step of `a/b/c/file.bin` points: a canary folder holding the rest of
    /// the path (so a naive open would find every folder it needs), or the canary file itself.
    static let steps: [(link: String, target: String)] = [
        ("a", "x"), ("a/b", "y"), ("a/b/c", "z"), ("a/b/c/file.bin", "file.bin"),
    ]

    @Test(arguments: Resolver.allCases, 0..<4)
    func aSymlinkAtAnyStepOfAPathFailsThatEntryOnly(resolver: Resolver, step: Int) throws {
        let scene = try Scene(resolver)
        let fx = scene.fx
        try fx.addFile(ConfinementTests.deepPath, size: 5000, seed: 1)
        let okSHA = try fx.addFile("ok.bin", size: 3000, seed: 2)
        try fx.writeManifest()
        let (link, target) = ConfinementTests.steps[step]
        try scene.plant(link, to: scene.canary.root + "/" + target)
        try #require(scene.canary.wouldReceiveWrite(at: fx.destPath(ConfinementTests.deepPath)),
                     "the planted link must lead into the canary, or this test proves nothing")
        let before = try scene.canary.snapshot()

        let result = try scene.sync()

        #expect(try scene.canary.snapshot() == before, "nothing outside DEST changes")
        #expect(result.exitCode == 1, "\(result)")
        let output = result.stdout + result.stderr
        #expect(output.contains(ConfinementTests.deepPath), "the failed entry is reported: \(output)")
        #expect(output.contains("symlink") || output.contains("symbolic link"), "the cause is named: \(output)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("ok.bin")) == okSHA, "other entries are synced")
        // The planted link itself is left alone (mirror deletes nothing it does not own).
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: fx.destPath(link))) != nil)
    }

    /// `.mirror`, `.mirror/partial`, the journal and the lock are the run's own state: a link in
    /// their place stops the run with exit 73 before any request (the destination cannot be used).
    @Test(arguments: Resolver.allCases, [
        (".mirror", "x"), (".mirror/partial", "x"), (".mirror/journal", "lone.bin"), (".mirror/lock", "lone.bin"),
    ])
    func aSymlinkAtTheStateFolderOrItsFilesStopsTheRun(resolver: Resolver, planted: (String, String)) throws {
        let scene = try Scene(resolver)
        let fx = scene.fx
        try fx.addFile("f.bin", size: 4000, seed: 3)
        try fx.writeManifest()
        try scene.plant(planted.0, to: scene.canary.root + "/" + planted.1)
        try #require(scene.canary.wouldReceiveWrite(at: fx.destPath(planted.0 + "/lock"))
                     || scene.canary.wouldReceiveWrite(at: fx.destPath(".mirror/partial/p"))
                     || (try FileManager.default.destinationOfSymbolicLink(atPath: fx.destPath(planted.0))).hasPrefix(scene.canary.root))
        let before = try scene.canary.snapshot()

        let result = try scene.sync()

        #expect(try scene.canary.snapshot() == before, "nothing outside DEST changes")
        #expect(result.exitCode == 73, "\(result)")
        #expect(result.stderr.contains(planted.0.split(separator: "/").last.map(String.init) ?? planted.0), "\(result.stderr)")
        #expect(try fx.requestsSoFar().isEmpty, "no request before the destination is usable")
    }

    /// A hard link to a file outside DEST planted as the journal or the lock (the tool truncates
    /// and writes those in place) is refused: exit 73, the linked file unchanged.
    @Test(arguments: Resolver.allCases, [".mirror/journal", ".mirror/lock"])
    func aHardLinkAsJournalOrLockIsRefused(resolver: Resolver, planted: String) throws {
        let scene = try Scene(resolver)
        let fx = scene.fx
        try fx.addFile("f.bin", size: 4000, seed: 3)
        try fx.writeManifest()
        try FileManager.default.createDirectory(atPath: fx.destPath(".mirror"), withIntermediateDirectories: true)
        try #require(link(scene.canary.root + "/lone.bin", fx.destPath(planted)) == 0, "link: \(errno)")
        let before = try scene.canary.snapshot()

        let result = try scene.sync()

        #expect(try scene.canary.snapshot() == before, "the linked file is not truncated or written")
        #expect(result.exitCode == 73, "\(result)")
        #expect(result.stderr.contains("hard link"), "\(result.stderr)")
    }

    /// A symlink planted as an entry's partial file before the run is not followed: a download from
    /// zero removes the link (not its target) and creates a fresh file with O_EXCL, mode 0600.
    @Test(arguments: Resolver.allCases)
    func aSymlinkAsThePartialFileIsReplacedNotFollowed(resolver: Resolver) throws {
        let scene = try Scene(resolver)
        let fx = scene.fx
        let sha = try fx.addFile("f.bin", size: 4000, seed: 3)
        try fx.writeManifest()
        let partial = ".mirror/partial/" + PartialFile.name(for: "f.bin")
        try scene.plant(partial, to: scene.canary.root + "/lone.bin")
        try #require(scene.canary.wouldReceiveWrite(at: scene.canary.root + "/lone.bin"))
        let before = try scene.canary.snapshot()

        let result = try scene.sync()

        #expect(try scene.canary.snapshot() == before)
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("f.bin")) == sha)
        var st = stat()
        #expect(lstat(fx.destPath("f.bin"), &st) == 0 && st.st_mode & S_IFMT == S_IFREG)
        #expect(st.st_mode & 0o7777 == 0o644, "the final mode is the default 0644")
    }

    // MARK: - Races during a slow transfer

    /// nginx sends 256 KiB/s: a 3 MiB file is in flight for seconds, long enough to plant links.
    static let slow = NginxServer.Options(limitRate: "256k")
    static let bigSize: Int64 = 3 << 20

    /// Waits (at most 30 s) until the entry's partial file holds some bytes: the transfer is running.
    static func waitForPartial(_ fx: SyncFixture, _ path: String, _ child: ChildProcess) throws -> String {
        let partial = fx.destPath(".mirror/partial/" + PartialFile.name(for: path))
        try Wait.until("the partial file of \(path) holds 64 KiB or the run ended", timeout: 30,
                       detail: "stderr: \((try? child.currentStderr()) ?? "")") {
            fx.size(of: partial) >= 64 << 10 || !child.isRunning
        }
        guard fx.size(of: partial) >= 64 << 10 else {
            throw HarnessError("the partial file of \(path) did not grow; stderr: \((try? child.currentStderr()) ?? "")")
        }
        return partial
    }

    @Test(arguments: Resolver.allCases)
    func aFolderSwappedForASymlinkDuringTheTransferFailsTheEntry(resolver: Resolver) throws {
        let scene = try Scene(resolver, nginx: ConfinementTests.slow)
        let fx = scene.fx
        try fx.addFile(ConfinementTests.deepPath, size: ConfinementTests.bigSize, seed: 4)
        try fx.writeManifest()
        try FileManager.default.createDirectory(atPath: fx.destPath("a/b/c"), withIntermediateDirectories: true)
        let before = try scene.canary.snapshot()

        let child = try scene.start(["--jobs", "1"])
        _ = try ConfinementTests.waitForPartial(fx, ConfinementTests.deepPath, child)
        try #require(rename(fx.destPath("a"), fx.destPath("a.moved")) == 0)
        try scene.plant("a", to: scene.canary.root + "/x")
        #expect(scene.canary.wouldReceiveWrite(at: fx.destPath(ConfinementTests.deepPath)))
        let result = try child.wait(timeout: 120)

        #expect(try scene.canary.snapshot() == before, "nothing outside DEST changes")
        #expect(result.exitCode == 1, "\(result)")
        #expect((result.stdout + result.stderr).contains(ConfinementTests.deepPath), "\(result)")
        #expect(!fx.exists(fx.destPath("a.moved/b/c/file.bin")), "nothing installed through a stale path either")
    }

    @Test(arguments: Resolver.allCases)
    func aPartialFileSwappedForASymlinkDuringTheTransferIsNeverInstalled(resolver: Resolver) throws {
        let scene = try Scene(resolver, nginx: ConfinementTests.slow)
        let fx = scene.fx
        try fx.addFile("big.bin", size: ConfinementTests.bigSize, seed: 5)
        try fx.writeManifest()
        let before = try scene.canary.snapshot()

        let child = try scene.start(["--jobs", "1"])
        let partial = try ConfinementTests.waitForPartial(fx, "big.bin", child)
        var inFlight = stat()
        #expect(lstat(partial, &inFlight) == 0 && inFlight.st_mode & 0o777 == 0o600, "unverified bytes are mode 0600")
        try #require(rename(partial, partial + ".moved") == 0)
        try #require(symlink(scene.canary.root + "/lone.bin", partial) == 0)
        let result = try child.wait(timeout: 120)

        #expect(try scene.canary.snapshot() == before, "nothing outside DEST changes")
        #expect(result.exitCode == 1, "\(result)")
        #expect((result.stdout + result.stderr).contains("replaced during the download"), "\(result)")
        var st = stat()
        let installed = lstat(fx.destPath("big.bin"), &st) == 0
        #expect(!installed || st.st_mode & S_IFMT != S_IFLNK, "the planted link is never installed at the entry's path")
    }

    /// `.mirror/partial` swapped for a link into the canary while a file downloads: the run keeps
    /// using the folder it opened (a descriptor), so nothing lands in the canary and the file installs.
    @Test(arguments: Resolver.allCases)
    func aPartialFolderSwappedForASymlinkDuringTheTransferIsNotFollowed(resolver: Resolver) throws {
        let scene = try Scene(resolver, nginx: ConfinementTests.slow)
        let fx = scene.fx
        let sha = try fx.addFile("big.bin", size: ConfinementTests.bigSize, seed: 6)
        try fx.writeManifest()
        let before = try scene.canary.snapshot()

        let child = try scene.start(["--jobs", "1"])
        _ = try ConfinementTests.waitForPartial(fx, "big.bin", child)
        try #require(rename(fx.destPath(".mirror/partial"), fx.destPath(".mirror/partial.moved")) == 0)
        try scene.plant(".mirror/partial", to: scene.canary.root + "/x")
        #expect(scene.canary.wouldReceiveWrite(at: fx.destPath(".mirror/partial/p")))
        let result = try child.wait(timeout: 120)

        #expect(try scene.canary.snapshot() == before, "nothing outside DEST changes")
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("big.bin")) == sha)
    }
}
