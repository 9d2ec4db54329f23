import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// A rollback that holds, and rolling forward from kept generations (docs/cli.md, "mirror
/// rollback", "Reuse by content"): after `rollback`, a sync of the manifest rolled back from
/// changes nothing and requests nothing; `rollback --release` and then that sync links the newer
/// set's files from the kept generation, with no file downloaded; another manifest releases the
/// hold by itself.
@Suite(.serialized) struct RollbackHoldTests {
    static let v1: [String: (Int64, UInt64)] = ["a.bin": (64 << 10, 1), "b/c.bin": (64 << 10, 2)]
    static let v2: [String: (Int64, UInt64)] = ["a.bin": (64 << 10, 1), "b/c.bin": (64 << 10, 3), "d.bin": (96 << 10, 5)]
    static let v3: [String: (Int64, UInt64)] = ["a.bin": (64 << 10, 1), "b/c.bin": (64 << 10, 3), "e.bin": (32 << 10, 6)]

    /// v1, v2 and a rollback to v1; the files requested by each later step are returned by `since`.
    static func rolledBack() throws -> SharedDestination {
        let d = try SharedDestination(limitRate: "64m")
        try d.version("v1", v1)
        try d.version("v2", v2)
        try d.version("v3", v3)
        #expect(try d.sync("v1", ["--atomic"]).exitCode == 0)
        #expect(try d.sync("v2", ["--atomic"]).exitCode == 0)
        #expect(try d.versionHeld(by: d.dest) == "v2")
        let back = try d.run(["rollback", "--dest", d.dest])
        #expect(back.exitCode == 0, "\(back)")
        #expect(back.stdout.contains("held at generation 1"), "\(back.stdout)")
        #expect(try d.versionHeld(by: d.dest) == "v1")
        return d
    }

    /// The GET requests nginx logged after the first `count`.
    static func gets(_ d: SharedDestination, after count: Int) throws -> [String] {
        try d.fx.requestsSoFar().dropFirst(count).filter { $0.method == "GET" }.map(\.uri)
    }

    @Test func theNextSyncOfTheNewerManifestChangesNothing() throws {
        let d = try Self.rolledBack()
        let before = try d.fx.requestsSoFar().count
        for extra in [[], ["--json"], ["--atomic"]] {
            let held = try d.sync("v2", extra)
            #expect(held.exitCode == 0, "\(held)")
            #expect(held.stdout.contains(extra == ["--json"] ? "\"held\":{\"from\":2" : "held at generation 1"), "\(held.stdout)")
        }
        #expect(try Self.gets(d, after: before).isEmpty, "a held sync requested files")
        #expect(try d.versionHeld(by: d.dest) == "v1")
        #expect(!FileManager.default.fileExists(atPath: d.store + "/g3"), "a held sync built a generation")
        let json = try d.sync("v2", ["--json"])
        #expect(json.stdout.contains("\"held\":{\"from\":2,\"generation\":1,\"manifests\":["), "\(json.stdout)")
        let status = try d.run(["status", d.manifestPath("v2"), "--dest", d.dest])
        #expect(status.stdout.contains("held at generation 1"), "\(status)")
    }

    @Test func aReleasedHoldRollsForwardWithoutADownload() throws {
        let d = try Self.rolledBack()
        _ = try d.sync("v2")
        let release = try d.run(["rollback", "--dest", d.dest, "--release"])
        #expect(release.exitCode == 0, "\(release)")
        #expect(release.stdout.contains("hold released"), "\(release.stdout)")
        let before = try d.fx.requestsSoFar().count
        let forward = try d.sync("v2")
        #expect(forward.exitCode == 0, "\(forward)")
        #expect(try d.versionHeld(by: d.dest) == "v2")
        #expect(try Self.gets(d, after: before).isEmpty, "rolling forward downloaded files")
        // Said, though nothing was fetched: DEST shows another set now (it printed nothing).
        #expect(forward.stdout.contains("; generation 3 published (was 1) in "), "\(forward.stdout)")
        #expect(!forward.stdout.contains("transferred") && !forward.stdout.contains("held"), "\(forward.stdout)")
        // Linked, not copied: the new generation shares the kept generation's inodes.
        #expect(AtomicTests.inode(d.store + "/g3/d.bin")?.ino == AtomicTests.inode(d.store + "/g2/d.bin")?.ino)
    }

    @Test func anotherManifestReleasesTheHoldByItself() throws {
        let d = try Self.rolledBack()
        let before = try d.fx.requestsSoFar().count
        let next = try d.sync("v3")
        #expect(next.exitCode == 0, "\(next)")
        #expect(next.stdout.contains("released the hold"), "\(next.stdout)")
        #expect(try d.versionHeld(by: d.dest) == "v3")
        // b/c.bin's v3 bytes are v2's: linked from the kept generation; only e.bin is new.
        #expect(try Self.gets(d, after: before) == ["/v3/e.bin"])
        #expect(!FileManager.default.fileExists(atPath: d.store + "/.mirror/hold"))
        // No hold any more: the next sync of v2 builds v2.
        #expect(try d.sync("v2").exitCode == 0)
        #expect(try d.versionHeld(by: d.dest) == "v2")
    }
}
