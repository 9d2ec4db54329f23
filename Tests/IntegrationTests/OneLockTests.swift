import Foundation
import Testing
import MirrorCore
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Two commands at once on one DEST (docs/cli.md, "One run at a time"): one lock, found by what
/// DEST is, taken before anything of DEST is opened; a waiter that a signal ends at once; and
/// what a rollback, a status and a plain run see beside an atomic run.
@Suite(.serialized) struct OneLockTests {
    static let mib: Int64 = 1 << 20
    /// Small files, and a version with a large one that keeps a run in flight for about 3 s at 4 MB/s.
    static let small: [String: (Int64, UInt64)] = ["a.bin": (64 << 10, 1), "b/c.bin": (64 << 10, 2)]
    static var large: [String: (Int64, UInt64)] { ["a.bin": (64 << 10, 1), "b/c.bin": (64 << 10, 3), "big.bin": (12 * mib, 4)] }

    /// A `--wait` sync queued behind an atomic sync that publishes: it opens nothing before it has
    /// the lock, so the set the first run published is never touched, and the waiter builds its own.
    @Test func aQueuedWaiterLeavesThePublishedGenerationAlone() throws {
        let d = try SharedDestination()
        try d.version("va", Self.small)
        try d.version("vb", Self.large)
        #expect(try d.sync("va", ["--atomic"]).exitCode == 0)

        let holder = try d.startSync("vb", ["--atomic", "--segments", "1"])
        try Wait.until("the first run holds the lock") { SharedDestination.holder(of: d.store + "/.mirror/lock") == holder.pid }
        let waiter = try d.startSync("va", ["--wait"])
        try Wait.until("the waiter opened the lock file") { ProcessState.hasOpen(waiter.pid, endingIn: "/.mirror/lock") }

        let first = try holder.wait(timeout: 120)
        #expect(first.exitCode == 0, "\(first)")
        let second = try waiter.wait(timeout: 120)
        #expect(second.exitCode == 0, "the waiter: \(second)")
        let published = try SharedDestination.contents(of: d.store + "/g2")
        #expect(published == d.versions["vb"], "the generation the first run published was changed: \(published)")
        #expect(try d.versionHeld(by: d.dest) == "va")
    }

    /// `DEST/.`, a symlink to DEST, DEST relative from another folder and the path of the current
    /// generation all find the one lock of an atomic DEST; another generation is refused, and no
    /// `.mirror` is ever made inside a generation.
    @Test func everySpellingOfADestinationFindsItsOneLock() throws {
        let d = try SharedDestination()
        try d.version("va", Self.small)
        try d.version("vb", ["a.bin": (64 << 10, 5)])
        #expect(try d.sync("va", ["--atomic"]).exitCode == 0)
        let alias = d.fx.dir.path("alias")
        try FileManager.default.createSymbolicLink(atPath: alias, withDestinationPath: d.dest)

        let fd = try SharedDestination.holdLock(d.store + "/.mirror/lock")
        for (spelling, cwd) in [(d.dest + "/.", nil), (alias, nil), ("dest/.", d.fx.dir.path), (d.store + "/g1", nil), (d.store + "/g1/", nil)] {
            let result = try d.run(["sync", d.manifestPath("vb"), "--dest", spelling, "--delete-unlisted"], cwd: cwd, timeout: 60)
            #expect(result.exitCode == 75, "--dest \(spelling) ran beside the holder: \(result)")
            #expect(result.stderr.contains("another mirror run"), "\(result.stderr)")
        }
        close(fd)
        #expect(!d.fx.exists(d.store + "/g1/.mirror"), "a .mirror was made inside the live generation")
        #expect(try d.versionHeld(by: d.dest) == "va")

        // Named by the generation it shows, a sync publishes the next one and exits 0.
        let shownPath = try d.sync("vb", dest: d.store + "/g1")
        #expect(shownPath.exitCode == 0, "\(shownPath)")
        #expect(try d.versionHeld(by: d.dest) == "vb")
        for stale in [d.store + "/g7", d.store + "/g2/sub"] {
            let result = try d.sync("va", dest: stale)
            #expect(result.exitCode == 73, "\(stale): \(result)")
            #expect(!d.fx.exists(stale), "\(stale) was made")
        }
        let old = try d.sync("va", dest: d.store + "/g1")
        #expect(old.exitCode == 73, "a generation kept for rollback was synced into: \(old)")
        #expect(old.stderr.contains("generation"), "\(old.stderr)")
        #expect(!d.fx.exists(d.store + "/g1/.mirror"))
        #expect(try d.versionHeld(by: d.store + "/g1") == "va")
    }

    /// `--delete-unlisted` of an outer DEST leaves a DEST inside it whole: its lock and journal
    /// stay while its own run holds them, so a second run of the inner DEST still exits 75.
    @Test func deleteUnlistedLeavesANestedDestinationAlone() throws {
        let d = try SharedDestination()
        try d.version("outer", ["top.bin": (4096, 1)])
        try d.version("inner", ["in.bin": (4096, 2)])
        #expect(try d.sync("outer").exitCode == 0)
        let inner = d.dest + "/sub"
        #expect(try d.sync("inner", dest: inner).exitCode == 0)
        try FileManager.default.createDirectory(atPath: inner + "/empty", withIntermediateDirectories: true)
        let lockBefore = AtomicTests.inode(inner + "/.mirror/lock")?.ino

        let fd = try SharedDestination.holdLock(inner + "/.mirror/lock")
        defer { close(fd) }
        let outer = try d.sync("outer", ["--delete-unlisted", "--max-delete", "100%"])
        #expect(outer.exitCode == 0, "\(outer)")
        #expect(AtomicTests.inode(inner + "/.mirror/lock")?.ino == lockBefore, "the inner DEST's lock was removed")
        #expect(d.fx.exists(inner + "/.mirror/journal") && d.fx.exists(inner + "/in.bin") && d.fx.exists(inner + "/empty"))
        let second = try d.sync("inner", dest: inner)
        #expect(second.exitCode == 75, "a second run of the inner DEST ran beside its holder: \(second)")
    }

    /// SIGTERM to a sync waiting with `--wait` ends it at once with exit 75, nothing done, while
    /// the lock is still held.
    @Test func aSignalEndsAWaitAtOnce() throws {
        let d = try SharedDestination()
        try d.version("va", Self.small)
        try FileManager.default.createDirectory(atPath: d.dest + "/.mirror", withIntermediateDirectories: true)
        let fd = try SharedDestination.holdLock(d.dest + "/.mirror/lock")
        defer { close(fd) }

        let waiter = try d.startSync("va", ["--wait"])
        try Wait.until("the waiter opened the lock file") { ProcessState.hasOpen(waiter.pid, endingIn: "/.mirror/lock") }
        waiter.signal(SIGTERM)
        let result = try waiter.wait(timeout: 20)
        #expect(result.exitCode == 75, "\(result)")
        #expect(result.stderr.contains("stopped while waiting"), "\(result.stderr)")
        #expect(!d.fx.exists(d.dest + "/a.bin"))
    }

    /// `rollback --wait` behind a publishing sync goes back from what that sync published.
    @Test func aWaitingRollbackGoesBackFromWhatWasPublished() throws {
        let d = try SharedDestination()
        try d.version("va", Self.small)
        try d.version("vb", Self.large)
        #expect(try d.sync("va", ["--atomic"]).exitCode == 0)

        let holder = try d.startSync("vb", ["--segments", "1"])
        try Wait.until("the sync holds the lock") { SharedDestination.holder(of: d.store + "/.mirror/lock") == holder.pid }
        let rollback = try d.start(["rollback", "--dest", d.dest, "--wait"])
        try Wait.until("the rollback opened the lock file") { ProcessState.hasOpen(rollback.pid, endingIn: "/.mirror/lock") }
        #expect(try holder.wait(timeout: 120).exitCode == 0)
        let back = try rollback.wait(timeout: 60)
        #expect(back.exitCode == 0, "\(back)")
        #expect(back.stdout.contains("generation 1 (was 2)"), "\(back.stdout)")
        #expect(try d.versionHeld(by: d.dest) == "va")
    }

    /// `status` beside an atomic run stopped just after it hard-linked the unchanged files into
    /// the next generation (their change times moved, their records not yet refreshed), and just
    /// after it pruned: every file is done, none unverified.
    @Test func statusBesideAnAtomicRunCountsRelinkedFilesDone() throws {
        let d = try SharedDestination()
        var files: [String: (Int64, UInt64)] = [:]
        for i in 0..<40 { files["f\(i).bin"] = (4096, UInt64(i + 1)) }
        try d.version("va", files)
        files["f0.bin"] = (4096, 100)
        try d.version("vb", files)
        files["f1.bin"] = (4096, 101)
        try d.version("vc", files)
        #expect(try d.sync("va", ["--atomic"]).exitCode == 0)
        #expect(try d.sync("vb").exitCode == 0)

        for (point, version, shown) in [("seed-after-links", "vc", "vb"), ("publish-after-prune", "va", "va")] {
            let run = try d.startSync(version, ["--keep", "1"], environment: ["MIRROR_STOP_AT": point])
            defer { run.signal(SIGKILL) }
            try Wait.until("the run stopped at \(point)") { SharedDestination.isStopped(run.pid) }
            let status = try d.run(["status", d.manifestPath(shown), "--dest", d.dest, "--json"], timeout: 60)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any], "\(status)")
            let counts = try #require(object["files"] as? [String: Any])
            #expect(counts["unverified"] as? Int == 0, "at \(point): \(counts)")
            #expect(counts["done"] as? Int == 40, "at \(point): \(counts)")
            #expect(object["sync_running"] as? Bool == true, "\(object)")
            run.signal(SIGCONT)
            #expect(try run.wait(timeout: 120).exitCode == 0)
        }
    }

    /// A plain sync started while an `--atomic` run converts DEST finds the lock the conversion
    /// moved into the store, and exits 75.
    @Test func aPlainRunBesideAConversionExits75() throws {
        let d = try SharedDestination()
        try d.version("va", Self.small)
        try d.version("vb", Self.large)
        #expect(try d.sync("va").exitCode == 0)

        let converting = try d.startSync("vb", ["--atomic", "--segments", "1"])
        try Wait.until("the conversion moved the state and holds its lock") {
            SharedDestination.holder(of: d.store + "/.mirror/lock") == converting.pid
        }
        let plain = try d.sync("vb")
        #expect(plain.exitCode == 75, "a plain run ran beside the conversion: \(plain)")
        #expect(!d.fx.exists(d.dest + "/.mirror"), "the plain run made a second state folder")
        #expect(try converting.wait(timeout: 120).exitCode == 0)
        #expect(try d.versionHeld(by: d.dest) == "vb")
    }

    /// A conversion killed mid-download is finished by the next run, plain or not: DEST becomes
    /// atomic, the partial download resumes (a Range request), and `status` knows the last run.
    @Test func aKilledConversionIsFinishedByTheNextPlainRun() throws {
        let d = try SharedDestination()
        try d.version("va", Self.small)
        try d.version("vb", Self.large)
        #expect(try d.sync("va").exitCode == 0)

        let converting = try d.startSync("vb", ["--atomic", "--segments", "1"])
        // Checkpoints come every 8 MiB: wait for the journal's record of one.
        try Wait.until("a part of big.bin is journaled") {
            let journal = (try? String(contentsOfFile: d.store + "/.mirror/journal", encoding: .utf8)) ?? ""
            return journal.contains("partial path=big.bin") && journal.contains("bytes=\(8 * Self.mib)")
        }
        converting.signal(SIGKILL)
        _ = try converting.wait(timeout: 30)

        let next = try d.sync("vb")
        #expect(next.exitCode == 0, "\(next)")
        #expect(SharedDestination.symlinkTarget(d.dest)?.hasPrefix("dest.generations/g") == true, "DEST was not made atomic")
        #expect(try d.versionHeld(by: d.dest) == "vb")
        let big = try d.fx.requests(atLeast: 1).filter { $0.uri == "/vb/big.bin" }
        #expect(big.last?.rangeHeader != nil, "the partial download was not resumed: \(big)")
        let status = try d.run(["status", d.manifestPath("vb"), "--dest", d.dest], timeout: 60)
        #expect(status.stdout.contains("last run: ") && !status.stdout.contains("last run: none"), "\(status.stdout)")
    }
}

extension SharedDestination {
    static func symlinkTarget(_ path: String) -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: path)
    }
}
