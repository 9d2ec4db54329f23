import Foundation
import Testing
import MirrorCore
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// What an atomic DEST's generations may and may not be (docs/cli.md, "Atomic destinations"):
/// every listed generation is one version's whole set, even after a kill during pruning; mirror
/// removes nothing beside DEST that it did not make; a store that is not this user's alone is
/// refused, never published.
@Suite(.serialized) struct GenerationSafetyTests {
    static func files(_ seed: UInt64) -> [String: (Int64, UInt64)] {
        var out: [String: (Int64, UInt64)] = [:]
        for i in 0..<20 { out["set/f\(i).bin"] = (2048, seed * 100 + UInt64(i)) }
        return out
    }

    /// v0, v1, then v2 with `--keep 1`, killed while it prunes g1: no command lists or switches
    /// to a half-removed generation, and the next run sweeps what the kill left.
    @Test func aKillDuringPruningLeavesNoTornGenerationForRollback() throws {
        let d = try SharedDestination(limitRate: "64m")
        for v in 0..<3 { try d.version("v\(v)", Self.files(UInt64(v + 1))) }
        #expect(try d.sync("v0", ["--atomic"]).exitCode == 0)
        #expect(try d.sync("v1").exitCode == 0)
        let killed = try d.sync("v2", ["--keep", "1"], environment: ["MIRROR_CRASH_AT": "prune-mid-removal"])
        #expect(killed.signal == SIGKILL, "\(killed)")

        try expectEveryGenerationWhole(d)
        let back = try d.run(["rollback", "--dest", d.dest], timeout: 60)
        if back.exitCode == 0 {
            #expect(try d.versionHeld(by: d.dest) != nil, "rollback switched to a set of no version: \(back)")
        } else {
            #expect(back.exitCode == 1, "\(back)")
        }
        try expectEveryGenerationWhole(d)
        if back.exitCode == 0 {
            // The rollback holds against v2 (docs/cli.md, "mirror rollback"): released by hand.
            #expect(try d.run(["rollback", "--dest", d.dest, "--release"]).exitCode == 0)
        }
        #expect(try d.sync("v2").exitCode == 0)
        let left = try FileManager.default.contentsOfDirectory(atPath: d.store).filter { $0.hasPrefix(".pruning") }
        #expect(left.isEmpty, "the next run left \(left)")
        #expect(try d.versionHeld(by: d.dest) == "v2")
    }

    func expectEveryGenerationWhole(_ d: SharedDestination) throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: d.store).filter { $0.hasPrefix("g") }
        for name in names {
            let held = try SharedDestination.contents(of: d.store + "/" + name)
            #expect(try d.versionHeld(by: d.store + "/" + name) != nil, "\(name) is listed but holds no version's whole set: \(held.count) files")
        }
        let status = try d.run(["status", d.manifestPath("v2"), "--dest", d.dest], timeout: 60)
        #expect(!status.stdout.contains(".pruning"), "\(status.stdout)")
    }

    /// The first `--atomic` run on a plain DEST that held a complete set keeps that set as its own
    /// generation, so `rollback` goes back to it; a plain DEST holding a file mirror never
    /// verified is not converted until `--delete-unlisted` allows the switch to drop it, and then
    /// in one generation.
    @Test func aConversionKeepsTheOldSetForRollback() throws {
        let d = try SharedDestination(limitRate: "64m")
        for v in 0..<2 { try d.version("v\(v)", Self.files(UInt64(v + 1))) }
        #expect(try d.sync("v0").exitCode == 0)
        let converted = try d.sync("v1", ["--atomic"])
        #expect(converted.exitCode == 0, "\(converted)")
        #expect(try d.versionHeld(by: d.store + "/g1") == "v0", "the set DEST held is not kept")
        #expect(try d.versionHeld(by: d.store + "/g2") == "v1")
        #expect(AtomicTests.inode(d.store + "/g1/set/f0.bin")?.links == 1, "the old set's files are not the ones DEST held")
        let back = try d.run(["rollback", "--dest", d.dest], timeout: 60)
        #expect(back.exitCode == 0, "\(back)")
        #expect(try d.versionHeld(by: d.dest) == "v0")

        let other = try SharedDestination(limitRate: "64m")
        for v in 0..<2 { try other.version("v\(v)", Self.files(UInt64(v + 1))) }
        #expect(try other.sync("v0").exitCode == 0)
        try Data("the user's".utf8).write(to: URL(fileURLWithPath: other.dest + "/notes.txt"))
        let refused = try other.sync("v1", ["--atomic", "--max-delete", "100%"])
        #expect(refused.exitCode == 1 && refused.stderr.contains("notes.txt"), "\(refused)")
        #expect(try other.sync("v1", ["--atomic", "--delete-unlisted", "--max-delete", "100%"]).exitCode == 0)
        let kept = try FileManager.default.contentsOfDirectory(atPath: other.store).filter { $0.hasPrefix("g") }
        #expect(kept == ["g1"], "a set with a file mirror never verified was kept: \(kept)")
    }

    /// The plain folder becomes generation 1 by one exchange of names: no file is linked or
    /// moved (same inodes, one link each), and a run killed after the store's `g1` symlink is
    /// made but before the exchange leaves DEST plain and whole; the next run removes the
    /// symlink, adopts the folder and publishes.
    @Test func theAdoptedFolderIsGenerationOneAndAKillBeforeTheExchangeIsHarmless() throws {
        let d = try SharedDestination(limitRate: "64m")
        for v in 0..<2 { try d.version("v\(v)", Self.files(UInt64(v + 1))) }
        #expect(try d.sync("v0").exitCode == 0)
        let before = AtomicTests.inode(d.dest + "/set/f0.bin")

        let killed = try d.startSync("v1", ["--atomic"], environment: ["MIRROR_STOP_AT": "adopt-before-exchange"])
        try Wait.until("the run stopped before its exchange") { SharedDestination.isStopped(killed.pid) }
        killed.signal(SIGKILL)
        _ = try killed.wait(timeout: 60)
        var st = stat()
        #expect(lstat(d.store + "/g1", &st) == 0 && st.st_mode & S_IFMT == S_IFLNK, "the symlink made before the exchange")
        #expect(lstat(d.dest, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR, "DEST is still the plain folder")
        #expect(try d.versionHeld(by: d.dest) == "v0")

        let converted = try d.sync("v1", ["--atomic"])
        #expect(converted.exitCode == 0, "\(converted.stdout) \(converted.stderr)")
        #expect(lstat(d.store + "/g1", &st) == 0 && st.st_mode & S_IFMT == S_IFDIR, "g1 is the folder DEST was")
        #expect(AtomicTests.inode(d.store + "/g1/set/f0.bin")?.ino == before?.ino, "the same file, not a copy")
        #expect(try d.versionHeld(by: d.store + "/g1") == "v0")
        #expect(try d.versionHeld(by: d.dest) == "v1")
        #expect(try d.run(["rollback", "--dest", d.dest], timeout: 60).exitCode == 0)
        #expect(try d.versionHeld(by: d.dest) == "v0")
    }

    /// A folder beside DEST named as an old version's switch (`.NAME.mirror-switch`), with a file
    /// in it, is never removed: mirror creates and removes nothing in DEST's parent but DEST and
    /// its store, through a conversion, new versions and a rollback.
    @Test func atomicRunsLeaveWhatIsBesideDestAlone() throws {
        let d = try SharedDestination(limitRate: "64m")
        for v in 0..<2 { try d.version("v\(v)", Self.files(UInt64(v + 1))) }
        let planted = d.fx.dir.path(".dest.mirror-switch")
        try FileManager.default.createDirectory(atPath: planted, withIntermediateDirectories: true)
        try Data("a user's notes".utf8).write(to: URL(fileURLWithPath: planted + "/notes.txt"))
        let before = try Set(FileManager.default.contentsOfDirectory(atPath: d.fx.dir.path))

        #expect(try d.sync("v0").exitCode == 0)
        #expect(try d.sync("v1", ["--atomic"]).exitCode == 0)
        #expect(try d.sync("v0").exitCode == 0)
        #expect(try d.run(["rollback", "--dest", d.dest], timeout: 60).exitCode == 0)

        #expect(d.fx.exists(planted + "/notes.txt"), "a folder beside DEST that mirror did not make was removed")
        let after = try Set(FileManager.default.contentsOfDirectory(atPath: d.fx.dir.path))
        #expect(after.subtracting(before) == ["dest", "dest.generations"], "new beside DEST: \(after.subtracting(before))")
    }

    /// A store another user made first (here uid 65534, as in a sticky shared parent), with a
    /// `building/` they filled: the run stops with exit 73, says to remove it, never publishes it.
    @Test func aStoreOfAnotherUserIsRefused() throws {
        guard geteuid() == 0 else { return }  // only root can make a folder another user's
        let d = try SharedDestination(limitRate: "64m")
        try d.version("v0", Self.files(1))
        try FileManager.default.createDirectory(atPath: d.store + "/building/set", withIntermediateDirectories: true)
        try Data("planted".utf8).write(to: URL(fileURLWithPath: d.store + "/building/set/f0.bin"))
        for path in [d.store, d.store + "/building", d.store + "/building/set", d.store + "/building/set/f0.bin"] {
            #expect(chown(path, 65534, 65534) == 0)
        }

        let result = try d.sync("v0", ["--atomic"])
        #expect(result.exitCode == 73, "\(result)")
        #expect(result.stderr.contains("remove it"), "\(result.stderr)")
        #expect(!result.stderr.contains("chown"), "\(result.stderr)")
        #expect(SharedDestination.symlinkTarget(d.dest) == nil, "DEST was switched to a store another user made")
        #expect(try String(contentsOfFile: d.store + "/building/set/f0.bin", encoding: .utf8) == "planted")
    }
}
