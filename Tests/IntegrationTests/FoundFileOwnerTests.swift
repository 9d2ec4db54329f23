import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// A file found at its path with the manifest's bytes is vouched for only as the running user's
/// file with the entry's mode (``FoundFilePolicy``; SECURITY.md, "local user who can write in
/// DEST"): another user's file, or one group or others may write, is replaced by a copy in a new
/// inode; this user's file with only another mode is `fchmod`ed in place.
@Suite(.serialized, .enabled(if: geteuid() == 0, "needs root to give a file to another user"))
struct FoundFileOwnerTests {
    static let nobody: uid_t = 65534

    struct Found: Equatable {
        var inode: UInt64
        var owner: UInt32
        var permissions: UInt32
    }

    /// `files.up_to_date` of a `--json` run.
    static func upToDate(_ run: ProcessResult) -> Int? {
        let json = (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) as? [String: Any]
        return (json?["files"] as? [String: Any])?["up_to_date"] as? Int
    }

    static func found(_ path: String) -> Found? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return Found(inode: UInt64(st.st_ino), owner: st.st_uid, permissions: UInt32(st.st_mode) & 0o7777)
    }

    /// Puts the served file's bytes at `relative` under `folder`, owned by `owner`, with `mode`
    /// (`chmod` after `chown`: a `chown` clears setuid and setgid).
    static func plant(_ fx: SyncFixture, _ relative: String, in folder: String, owner: uid_t, mode: mode_t) throws -> Found {
        let path = folder + "/" + relative
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: fx.www + "/" + relative, toPath: path)
        #expect(chown(path, owner, owner) == 0)
        #expect(chmod(path, mode) == 0)
        return try #require(found(path))
    }

    /// The tester's case: the right bytes, owned by nobody, mode 06777. After the sync the file at
    /// the path is root's (the running user's), mode 0644 (and 0755 where the manifest says so), a
    /// new inode; no byte came from the server; a second run is a no-op, and `verify` is good.
    @Test func anotherUsersSetuidFileIsReplacedByACopyOfOurOwn() throws {
        let fx = try SyncFixture()
        let sha = try fx.addFile("bin/tool", size: 200_000, seed: 1)
        let shaB = try TestData.writeFile(at: fx.www + "/run.sh", size: 3000, seed: 2)
        fx.manifest.add(path: "run.sh", size: 3000, sha256: shaB, extra: ["mode": "\"0755\""])
        try fx.writeManifest()
        let planted = try Self.plant(fx, "bin/tool", in: fx.dest, owner: Self.nobody, mode: 0o6777)
        let plantedB = try Self.plant(fx, "run.sh", in: fx.dest, owner: Self.nobody, mode: 0o6777)
        #expect(planted.permissions == 0o6777 && planted.owner == Self.nobody)

        let run = try fx.sync()
        #expect(run.exitCode == 0, "\(run)")
        #expect(run.stderr.contains("bin/tool: it belongs to uid 65534; its bytes are copied into a new file of this user's"), "\(run.stderr)")
        #expect(run.stdout.contains("replaced bin/tool"), "\(run.stdout)")
        let now = try #require(Self.found(fx.destPath("bin/tool")))
        #expect(now.owner == geteuid(), "still uid \(now.owner)")
        #expect(now.permissions == 0o644, "mode \(String(now.permissions, radix: 8))")
        #expect(now.inode != planted.inode, "the planted inode was adopted")
        let nowB = try #require(Self.found(fx.destPath("run.sh")))
        #expect(nowB.owner == geteuid() && nowB.permissions == 0o755 && nowB.inode != plantedB.inode, "\(nowB)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("bin/tool")) == sha)
        #expect(try fx.requestsSoFar().isEmpty, "copied from the file found, not downloaded")

        let again = try fx.sync(["--json"])
        #expect(again.exitCode == 0 && Self.upToDate(again) == 2, "\(again)")
        #expect(try Mirror.run(["verify", fx.manifestPath, "--dest", fx.dest], timeout: 60).exitCode == 0)

        // The copies keep the found files' standing (`found=1`): `--delete` leaves one the
        // manifest drops, as it leaves any file it found in place.
        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        fx.manifest.add(path: "bin/tool", size: 200_000, sha256: sha)
        try fx.writeManifest()
        let dropped = try fx.sync(["--delete"])
        #expect(dropped.exitCode == 0, "\(dropped)")
        #expect(fx.exists(fx.destPath("run.sh")), "a found file was deleted")
    }

    /// The same through `--atomic`: the file found in the plain DEST is not linked into the
    /// generation that is published; the generation holds a copy of the running user's.
    @Test func anotherUsersFileIsNotLinkedIntoAGeneration() throws {
        let fx = try SyncFixture()
        let sha = try fx.addFile("data.bin", size: 100_000, seed: 3)
        try fx.writeManifest()
        let planted = try Self.plant(fx, "data.bin", in: fx.dest, owner: Self.nobody, mode: 0o6777)

        let run = try fx.sync(["--atomic"])
        #expect(run.exitCode == 0, "\(run)")
        var st = stat()
        #expect(lstat(fx.dest, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK, "DEST is not a symlink")
        let now = try #require(Self.found(fx.destPath("data.bin")))
        #expect(now.owner == geteuid(), "still uid \(now.owner)")
        #expect(now.permissions == 0o644, "mode \(String(now.permissions, radix: 8))")
        #expect(now.inode != planted.inode, "the planted inode was linked into the generation")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("data.bin")) == sha)
    }

    /// A file mirror installed and journaled, then given away and opened up (`chown`, `chmod`:
    /// its change time moves): the journal's record no longer vouches for it, and it is copied.
    @Test func aVerifiedFileGivenAwayIsNoLongerVouchedFor() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 50_000, seed: 4)
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 0)
        let path = fx.destPath("a.bin")
        let before = try #require(Self.found(path))
        #expect(chown(path, Self.nobody, Self.nobody) == 0 && chmod(path, 0o6777) == 0)

        let run = try fx.sync(["--json"])
        #expect(run.exitCode == 0 && Self.upToDate(run) == 0, "\(run)")
        let now = try #require(Self.found(path))
        #expect(now.owner == geteuid() && now.permissions == 0o644 && now.inode != before.inode, "\(now)")
    }

    /// The running user's file that others may write (0666): copied into a new inode with the
    /// manifest's mode (anyone may hold it open for writing). The running user's setuid file that
    /// nobody else may write (04755 where the manifest says 0755): fixed in place with `fchmod`.
    @Test func ourOwnFileEndsWithTheManifestsMode() throws {
        let fx = try SyncFixture()
        let sha = try fx.addFile("open.bin", size: 20_000, seed: 5)
        let shaT = try TestData.writeFile(at: fx.www + "/tool", size: 4000, seed: 6)
        fx.manifest.add(path: "tool", size: 4000, sha256: shaT, extra: ["mode": "\"0755\""])
        try fx.writeManifest()
        let open = try Self.plant(fx, "open.bin", in: fx.dest, owner: geteuid(), mode: 0o666)
        let tool = try Self.plant(fx, "tool", in: fx.dest, owner: geteuid(), mode: 0o4755)

        let run = try fx.sync()
        #expect(run.exitCode == 0, "\(run)")
        let nowOpen = try #require(Self.found(fx.destPath("open.bin")))
        #expect(nowOpen.permissions == 0o644, "mode \(String(nowOpen.permissions, radix: 8))")
        #expect(nowOpen.inode != open.inode, "others may have it open for writing: a new inode")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("open.bin")) == sha)
        let nowTool = try #require(Self.found(fx.destPath("tool")))
        #expect(nowTool.permissions == 0o755, "mode \(String(nowTool.permissions, radix: 8))")
        #expect(nowTool.inode == tool.inode, "only the mode was wrong: fixed in place")
        #expect(try fx.requestsSoFar().isEmpty)

        let again = try fx.sync(["--json"])
        #expect(again.exitCode == 0 && Self.upToDate(again) == 2, "\(again)")
    }

    /// An atomic DEST whose manifest gives a file a new mode: the file in `building/` is one inode
    /// with the published generation's, so it is copied, not `fchmod`ed: the published set keeps
    /// its mode until the switch.
    @Test func aNewModeDoesNotReachThePublishedGeneration() throws {
        let fx = try SyncFixture()
        let sha = try fx.addFile("x.sh", size: 5000, seed: 8)
        try fx.writeManifest()
        #expect(try fx.sync(["--atomic"]).exitCode == 0)
        let published = try #require(Self.found(fx.destPath("x.sh")))
        let first = try FileManager.default.destinationOfSymbolicLink(atPath: fx.dest)

        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        fx.manifest.add(path: "x.sh", size: 5000, sha256: sha, extra: ["mode": "\"0755\""])
        try fx.writeManifest()
        let run = try fx.sync(["--atomic"])
        #expect(run.exitCode == 0, "\(run)")
        let now = try #require(Self.found(fx.destPath("x.sh")))
        #expect(now.permissions == 0o755 && now.inode != published.inode, "\(now)")
        let old = try #require(Self.found(fx.dir.path(first + "/x.sh")))
        #expect(old.permissions == 0o644 && old.inode == published.inode, "the earlier generation changed: \(old)")
    }

    /// Reuse by content: a `--seed` file owned by nobody, mode 06777, gives its bytes to a new
    /// partial file of the running user's; the installed file is not the seed's inode.
    @Test func aSeedOfAnotherUserIsCopiedNotLinked() throws {
        let fx = try SyncFixture()
        try fx.addFile("s.bin", size: 300_000, seed: 7)
        try fx.writeManifest()
        let seed = fx.dir.path("usb")
        let planted = try Self.plant(fx, "s.bin", in: seed, owner: Self.nobody, mode: 0o6777)

        let run = try fx.sync(["--seed", seed])
        #expect(run.exitCode == 0 && run.stdout.contains("copied s.bin"), "\(run)")
        let now = try #require(Self.found(fx.destPath("s.bin")))
        #expect(now.owner == geteuid() && now.permissions == 0o644 && now.inode != planted.inode, "\(now)")
        #expect(Self.found(seed + "/s.bin") == planted, "the seed was changed")
    }
}
