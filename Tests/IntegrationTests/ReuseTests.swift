import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// Reuse by content (docs/cli.md, "Reuse by content"), against nginx: bytes already on this
/// machine are copied, verified, and not downloaded again.
@Suite(.serialized) struct ReuseTests {
    static let big: Int64 = 64 << 20

    /// The bytes nginx sent since the first `skip` requests.
    static func bytesSent(_ fx: SyncFixture, after skip: Int) throws -> Int64 {
        try fx.requestsSoFar().dropFirst(skip).reduce(0) { $0 + $1.bodyBytesSent }
    }

    /// A 64 MiB file renamed in the manifest, and a second path with the same content: at most
    /// 1 MiB from the server (here: none), the output says "copied from", and the copies verify.
    @Test func aRenamedAndADuplicatedFileCostNoDownload() throws {
        let fx = try SyncFixture()
        let sha = try fx.addFile("videos/intro.mp4", size: Self.big, seed: 1)
        try fx.addFile("notes.txt", size: 1000, seed: 2)
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 0)
        let before = try fx.requests(atLeast: 2).count

        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        fx.manifest.add(path: "videos/2026/intro.mp4", size: Self.big, sha256: sha, url: fx.server.baseURL + "videos/intro.mp4")
        fx.manifest.add(path: "backup/intro-copy.mp4", size: Self.big, sha256: sha, url: fx.server.baseURL + "videos/intro.mp4")
        fx.manifest.add(path: "notes.txt", size: 1000, sha256: try TestData.sha256(ofFileAt: fx.www + "/notes.txt"))
        try fx.writeManifest()
        let run = try fx.sync(["--json"])
        #expect(run.exitCode == 0, "\(run)")
        let sent = try Self.bytesSent(fx, after: before)
        #expect(sent <= 1 << 20, "the server sent \(sent) bytes for a rename and a duplicate")
        #expect(run.stdout.contains("\"copied_from\""), "\(run.stdout)")
        for path in ["videos/2026/intro.mp4", "backup/intro-copy.mp4"] {
            #expect(try TestData.sha256(ofFileAt: fx.destPath(path)) == sha)
        }
        let delete = try fx.sync(["--delete"])
        #expect(delete.exitCode == 0, "\(delete)")
        #expect(!fx.exists(fx.destPath("videos/intro.mp4")), "--delete removes the old name")
        let verify = try Mirror.run(["verify", fx.manifestPath, "--dest", fx.dest], timeout: 60)
        #expect(verify.exitCode == 0, "\(verify)")
    }

    /// Two files that swap contents (A=X, B=Y becoming A=Y, B=X): each is copied from the other
    /// before either is replaced, and nothing is downloaded or hashed before the copy.
    @Test(arguments: [false, true]) func twoFilesThatSwapContentsCostNoDownload(atomic: Bool) throws {
        let fx = try SyncFixture()
        let mode = atomic ? ["--atomic"] : []
        let x = try fx.addFile("a.bin", size: 3 << 20, seed: 1)
        let y = try fx.addFile("b.bin", size: 3 << 20, seed: 2)
        try fx.writeManifest()
        #expect(try fx.sync(mode).exitCode == 0)
        let before = try fx.requests(atLeast: 2).count

        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        fx.manifest.add(path: "a.bin", size: 3 << 20, sha256: y, url: fx.server.baseURL + "b.bin")
        fx.manifest.add(path: "b.bin", size: 3 << 20, sha256: x, url: fx.server.baseURL + "a.bin")
        try fx.writeManifest()
        let dry = try fx.sync(["--dry-run"])
        #expect(!dry.stdout.contains("check"), "a file the journal knows as the old version is hashed first: \(dry.stdout)")
        let run = try fx.sync()
        #expect(run.exitCode == 0, "\(run)")
        let requested = try fx.requestsSoFar().dropFirst(before).map(\.uri)
        #expect(requested.isEmpty, "a swap downloaded: \(requested)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("a.bin")) == y)
        #expect(try TestData.sha256(ofFileAt: fx.destPath("b.bin")) == x)
    }

    /// An entry whose file is there but holds other bytes (a check finds them) is copied from the
    /// verified file that has its new content, even after the run began fetching something else:
    /// here its own URL answers 404, so only a copy can finish the run.
    @Test func aFileThatACheckFindsChangedIsCopiedFromAVerifiedOne() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 4000, seed: 1)
        let shaC = try fx.addFile("c.bin", size: 4000, seed: 2)
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 0)

        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        fx.manifest.add(path: "a.bin", size: 4000, sha256: shaC, url: fx.server.baseURL + "gone/a.bin")
        fx.manifest.add(path: "c.bin", size: 4000, sha256: shaC)
        for i in 0 ..< 3 { try fx.addFile("new\(i).bin", size: 1000, seed: UInt64(10 + i)) }
        try fx.writeManifest()
        let run = try fx.sync()
        #expect(run.exitCode == 0, "\(run)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("a.bin")) == shaC)
        #expect(!(try fx.requestsSoFar()).contains { $0.uri == "/gone/a.bin" }, "copied, not fetched")
    }

    /// A seed folder holding two of three files: only the third comes from the server. A seed file
    /// of the right size but other bytes, and a file in DEST changed since it was verified, never
    /// end up at a path: what is copied is verified like a download.
    @Test func aSeedCostsOnlyWhatItDoesNotHold() throws {
        let fx = try SyncFixture()
        let a = try fx.addFile("a.bin", size: 3 << 20, seed: 1)
        try fx.addFile("b.bin", size: 2 << 20, seed: 2)
        try fx.addFile("c.bin", size: 1 << 20, seed: 3)
        try fx.writeManifest()
        let seed = fx.dir.path("usb")
        try FileManager.default.createDirectory(atPath: seed + "/old", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: fx.www + "/a.bin", toPath: seed + "/old/first.bin")
        try FileManager.default.copyItem(atPath: fx.www + "/b.bin", toPath: seed + "/second.bin")
        try TestData.writeFile(at: seed + "/impostor.bin", size: 1 << 20, seed: 99)  // c.bin's size, other bytes

        let run = try fx.sync(["--seed", seed])
        #expect(run.exitCode == 0, "\(run)")
        #expect(run.stdout.contains("copied a.bin (3.0 MiB) from \(seed)/old/first.bin"), "\(run.stdout)")
        let sent = try Self.bytesSent(fx, after: 0)
        #expect(sent == 1 << 20, "the server sent \(sent) bytes; only c.bin (1 MiB) was missing")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("a.bin")) == a)
        #expect(try TestData.sha256(ofFileAt: fx.destPath("c.bin")) == TestData.sha256(ofFileAt: fx.www + "/c.bin"))

        // A file in DEST changed since mirror verified it is no source for another path.
        let handle = try #require(FileHandle(forWritingAtPath: fx.destPath("a.bin")))
        handle.write(Data("changed".utf8))
        handle.closeFile()
        fx.manifest.add(path: "a-again.bin", size: 3 << 20, sha256: a, url: fx.server.baseURL + "a.bin")
        try fx.writeManifest()
        let before = try fx.requestsSoFar().count
        let again = try fx.sync()
        #expect(again.exitCode == 0, "\(again)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("a-again.bin")) == a)
        #expect(try TestData.sha256(ofFileAt: fx.destPath("a.bin")) == a)
        #expect(!again.stdout.contains("copied"), "\(again.stdout)")
        _ = before
    }

    /// One content at three new paths in one run (and one other file): fetched once, the other
    /// two copied from the first once it is installed, with `--jobs 4` so all could have started
    /// at once. When the first path's source has no such file (404), the others still come from
    /// their own URLs and the run ends with that one failure.
    @Test func oneContentAtSeveralNewPathsIsFetchedOnce() throws {
        let fx = try SyncFixture()
        let sha = try TestData.writeFile(at: fx.www + "/src/data.bin", size: 16 << 20, seed: 5)
        for path in ["a/data.bin", "b/data.bin", "c/data.bin"] {
            fx.manifest.add(path: path, size: 16 << 20, sha256: sha, url: fx.server.baseURL + "src/data.bin")
        }
        try fx.addFile("other.bin", size: 1 << 20, seed: 6)
        try fx.writeManifest()
        let run = try fx.sync(["--jobs", "4"])
        #expect(run.exitCode == 0, "\(run)")
        let sent = try Self.bytesSent(fx, after: 0)
        #expect(sent == (16 << 20) + (1 << 20), "the server sent \(sent) bytes for one 16 MiB content at 3 paths and 1 MiB")
        for path in ["a/data.bin", "b/data.bin", "c/data.bin"] { #expect(try TestData.sha256(ofFileAt: fx.destPath(path)) == sha) }
        #expect(run.stdout.contains("copied b/data.bin (16.0 MiB) from"), "\(run.stdout)")

        // The first path's source is gone: the others fetch from theirs.
        let fx2 = try SyncFixture()
        let sha2 = try TestData.writeFile(at: fx2.www + "/good.bin", size: 4 << 20, seed: 7)
        fx2.manifest.add(path: "x/first.bin", size: 4 << 20, sha256: sha2, url: fx2.server.baseURL + "missing.bin")
        fx2.manifest.add(path: "y/second.bin", size: 4 << 20, sha256: sha2, url: fx2.server.baseURL + "good.bin")
        try fx2.writeManifest()
        let failing = try fx2.sync(["--retries", "0"])
        #expect(failing.exitCode == 1, "\(failing)")
        #expect(try TestData.sha256(ofFileAt: fx2.destPath("y/second.bin")) == sha2)
        #expect(!fx2.exists(fx2.destPath("x/first.bin")))
    }
}
