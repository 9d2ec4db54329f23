import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// A change time that moved while the bytes could not have (docs/journal.md, "When the change
/// time moves"): a hard link made elsewhere (`cp -al`, a backup tool), or every link an atomic
/// publish makes and prunes. The next run hashes nothing and journals nothing for such files; a
/// file that group or others may write keeps the strict rule; `mirror verify` still reads every
/// byte.
@Suite(.serialized)
struct ChangeTimeTests {
    static func files(_ run: ProcessResult) -> [String: Any] {
        let json = (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) as? [String: Any]
        return json?["files"] as? [String: Any] ?? [:]
    }

    static func lineCount(_ path: String) throws -> Int {
        try Data(contentsOf: URL(fileURLWithPath: path)).reduce(0) { $0 + ($1 == 0x0a ? 1 : 0) }
    }

    /// Links every file of `folder` (but `.mirror`) into `into`, as `cp -al` does: each file's
    /// change time moves, nothing else about it.
    static func linkTree(_ folder: String, into: String) throws {
        let names = try FileManager.default.subpathsOfDirectory(atPath: folder).filter { !$0.hasPrefix(".mirror") }
        for name in names {
            var st = stat()
            guard lstat(folder + "/" + name, &st) == 0 else { continue }
            if st.st_mode & S_IFMT == S_IFDIR {
                try FileManager.default.createDirectory(atPath: into + "/" + name, withIntermediateDirectories: true)
            } else {
                try FileManager.default.createDirectory(atPath: ((into + "/" + name) as NSString).deletingLastPathComponent,
                                                        withIntermediateDirectories: true)
                #expect(link(folder + "/" + name, into + "/" + name) == 0, "link \(name)")
            }
        }
    }

    static func changeTime(_ path: String) -> timespec? {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_ctim : nil
    }

    /// Rewrites the first byte of `path` in place and puts its modification time back, as only
    /// its owner (or root) can (`utimensat(2)`).
    static func rewriteKeepingModificationTime(_ path: String) throws {
        var st = stat()
        try #require(lstat(path, &st) == 0)
        let fd = open(path, O_WRONLY)
        try #require(fd >= 0)
        var byte: UInt8 = 0x5a
        #expect(pwrite(fd, &byte, 1, 0) == 1)
        close(fd)
        var times = [st.st_atim, st.st_mtim]
        #expect(utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0)
    }

    /// Every file of a synced plain DEST linked elsewhere: the next run hashes none of them and
    /// journals only its run record.
    @Test func linksMadeElsewhereCostNoHashAndNoJournal() throws {
        let fx = try SyncFixture()
        for i in 0..<20 { try fx.addFile("d\(i % 3)/f\(i).bin", size: 3000 + Int64(i), seed: UInt64(i + 1)) }
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 0)
        let journal = fx.dest + "/.mirror/journal"
        let before = try Self.lineCount(journal)
        let ctime = Self.changeTime(fx.destPath("d0/f0.bin"))

        try Self.linkTree(fx.dest, into: fx.dir.path("copy"))
        let moved = Self.changeTime(fx.destPath("d0/f0.bin"))
        #expect(moved?.tv_sec != ctime?.tv_sec || moved?.tv_nsec != ctime?.tv_nsec, "the link moved the change time")

        let run = try fx.sync(["--json"])
        #expect(run.exitCode == 0, "\(run)")
        let files = Self.files(run)
        #expect(files["checked"] as? Int == 0, "no file hashed again: \(files)")
        #expect(files["up_to_date"] as? Int == 20, "\(files)")
        #expect(try Self.lineCount(journal) == before + 1, "only the run record is journaled")
    }

    /// A file whose mode lets its group write keeps the strict rule: after a link it is hashed
    /// again, and bytes changed with the modification time put back are found and fetched again.
    @Test func aGroupWritableFileIsHashedAgainWhenItsChangeTimeMoves() throws {
        let fx = try SyncFixture()
        let sha = try TestData.writeFile(at: fx.www + "/shared.bin", size: 5000, seed: 7)
        fx.manifest.add(path: "shared.bin", size: 5000, sha256: sha, extra: ["mode": "\"0664\""])
        try fx.addFile("private.bin", size: 5000, seed: 8)
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 0)

        try Self.linkTree(fx.dest, into: fx.dir.path("copy"))
        let run = try fx.sync(["--json"])
        #expect(run.exitCode == 0, "\(run)")
        #expect(Self.files(run)["checked"] as? Int == 1, "the group-writable file alone: \(Self.files(run))")

        try Self.rewriteKeepingModificationTime(fx.destPath("shared.bin"))
        let again = try fx.sync(["--json"])
        #expect(again.exitCode == 0, "\(again)")
        #expect(Self.files(again)["replaced"] as? Int == 1, "\(Self.files(again))")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("shared.bin")) == sha)
    }

    /// The trade the rule makes, as documented: this user's file rewritten by this user with its
    /// modification time put back is not read by `sync`; `mirror verify` reads it and says so.
    @Test func verifyFindsWhatOnlyTheOwnerCouldHaveHidden() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 4000, seed: 3)
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 0)
        try Self.rewriteKeepingModificationTime(fx.destPath("a.bin"))
        let run = try fx.sync(["--json"])
        #expect(run.exitCode == 0 && Self.files(run)["up_to_date"] as? Int == 1, "\(run)")
        let verify = try Mirror.run(["verify", fx.manifestPath, "--dest", fx.dest], timeout: 60)
        #expect(verify.exitCode == 1, "\(verify)")
        #expect(verify.stdout.contains("a.bin") || verify.stderr.contains("a.bin"), "\(verify)")
    }

    /// An atomic DEST: publishing a set in which one file changed journals that file, not every
    /// file it linked and pruned, and the next run hashes nothing.
    @Test func anAtomicPublishJournalsOnlyWhatChanged() throws {
        let fx = try SyncFixture()
        for i in 0..<30 { try fx.addFile("f\(i).bin", size: 2000, seed: UInt64(i + 1)) }
        try fx.writeManifest()
        #expect(try fx.sync(["--atomic", "--keep", "1"]).exitCode == 0)
        let journal = fx.dest + ".generations/.mirror/journal"
        let before = try Self.lineCount(journal)

        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        for i in 0..<30 { try fx.addFile("f\(i).bin", size: 2000, seed: UInt64(i == 0 ? 100 : i + 1)) }
        try fx.writeManifest()
        let publish = try fx.sync(["--atomic", "--keep", "1", "--json"])
        #expect(publish.exitCode == 0, "\(publish)")
        #expect(Self.files(publish)["checked"] as? Int == 0, "\(Self.files(publish))")
        let added = try Self.lineCount(journal) - before
        #expect(added < 10, "journaled \(added) lines for one changed file of 30")

        let noop = try fx.sync(["--atomic", "--keep", "1", "--json"])
        #expect(noop.exitCode == 0 && Self.files(noop)["checked"] as? Int == 0 && Self.files(noop)["up_to_date"] as? Int == 30,
                "\(noop)")
    }
}
