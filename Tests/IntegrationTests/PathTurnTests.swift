import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// A republish that turns a file into a folder (`x` becomes `x/y`) or a folder into a file: what
/// mirror installed there, unchanged and no longer listed, is replaced in the first run of the
/// new manifest, with or without `--delete`, plain or `--atomic`; anything else in the way still
/// blocks the entry and is left as it is (docs/cli.md, "A path that turns").
@Suite(.serialized) struct PathTurnTests {
    /// Which way the path turns, and how big the new file is: at most 1 MiB goes through the file
    /// with no name (`linkat`), more through a named partial file (`renameat`).
    enum Turn: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case fileToFolderSmall, fileToFolderLarge, folderToFileSmall, folderToFileLarge
        var testDescription: String { rawValue }
        var newSize: Int64 { self == .fileToFolderSmall || self == .folderToFileSmall ? 300_000 : 2_500_000 }
        var toFolder: Bool { self == .fileToFolderSmall || self == .fileToFolderLarge }
        /// v0's paths and v1's: `pf` as a file in one, a folder of files in the other.
        var v0: [String] { toFolder ? ["pf"] : ["pf/a.bin", "pf/sub/b.bin"] }
        var v1: [String] { toFolder ? ["pf/inner.bin"] : ["pf"] }
    }

    /// Two files that stay listed, so that no deletion guardrail (`--max-delete` 50 %) counts the
    /// turned path as most of DEST.
    static let kept = ["keep/one.bin", "keep/two.bin"]

    /// Serves `paths` under `version/` (seeded by `seed`) and the kept files, and lists them all.
    private func publish(_ fx: SyncFixture, _ version: String, _ paths: [String], size: Int64, seed: UInt64) throws -> [String: String] {
        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        var shas: [String: String] = [:]
        for (i, path) in paths.enumerated() {
            let sha = try TestData.writeFile(at: fx.www + "/\(version)/" + path, size: size, seed: seed + UInt64(i))
            fx.manifest.add(path: path, size: size, sha256: sha, url: fx.server.url("\(version)/" + path))
            shas[path] = sha
        }
        for (i, path) in Self.kept.enumerated() {
            let sha = try TestData.writeFile(at: fx.www + "/kept/" + path, size: 50_000, seed: 90 + UInt64(i))
            fx.manifest.add(path: path, size: 50_000, sha256: sha, url: fx.server.url("kept/" + path))
        }
        try fx.writeManifest()
        return shas
    }

    /// A small file (no name until installed) that turns back and forth: each run converges, the
    /// installed file has one name (none left behind in the partial folder), and its record holds.
    @Test func aSmallFileTurnsBackAndForth() throws {
        let fx = try SyncFixture()
        for (round, paths) in [["pf/inner.bin"], ["pf"], ["pf/inner.bin"], ["pf"]].enumerated() {
            _ = try publish(fx, "r\(round)", paths, size: 100_000, seed: UInt64(10 * round + 1))
            let run = try fx.sync()
            #expect(run.exitCode == 0, "round \(round): \(run)")
            let installed = try #require(AtomicTests.inode(fx.destPath(paths[0])), "round \(round)")
            #expect(installed.links == 1, "round \(round): \(paths[0]) has \(installed.links) names")
            let status = try Mirror.run(["status", fx.manifestPath, "--dest", fx.dest, "--json"], timeout: 60)
            #expect(status.stdout.contains("\"unverified\":0"), "round \(round): \(status.stdout)")
        }
    }

    @Test(arguments: [[], ["--delete"], ["--atomic"]], Turn.allCases)
    func aPathMirrorInstalledTurnsInTheFirstRun(flags: [String], turn: Turn) throws {
        let fx = try SyncFixture()
        _ = try publish(fx, "v0", turn.v0, size: 200_000, seed: 1)
        let first = try fx.sync(flags)
        #expect(first.exitCode == 0, "\(first)")

        let shas = try publish(fx, "v1", turn.v1, size: turn.newSize, seed: 11)
        let dry = try fx.sync(flags + ["--dry-run"])
        for path in turn.v1 { #expect(dry.stdout.contains("replace \(path) ("), "\(dry)") }
        let turned = try fx.sync(flags)
        #expect(turned.exitCode == 0, "the first run of v1 must converge: \(turned)")
        for (path, sha) in shas {
            #expect((try? TestData.sha256(ofFileAt: fx.destPath(path))) == sha, "\(path) holds v1's bytes")
        }
        if !turn.toFolder {
            #expect(!fx.exists(fx.destPath("pf/a.bin")) && !fx.exists(fx.destPath("pf/sub")), "v0's folder is gone")
        }
        // Converged: the next run has nothing to do, and verify agrees with the manifest.
        let again = try fx.sync(flags + ["--json"])
        #expect(again.exitCode == 0 && again.stdout.contains("\"up_to_date\":3"), "\(again)")
        let verify = try Mirror.run(["verify", fx.manifestPath, "--dest", fx.dest], timeout: 60)
        #expect(verify.exitCode == 0, "\(verify)")
        if flags.isEmpty {
            // A file with no name that was given one to meet the folder in its way left nothing behind.
            let left = try FileManager.default.contentsOfDirectory(atPath: fx.dest + "/.mirror/partial")
            #expect(left.isEmpty, "\(left)")
            // The journal says the old path's files went: `forget ... all=1` for each.
            let journal = try String(contentsOfFile: fx.dest + "/.mirror/journal", encoding: .utf8)
            for path in turn.v0 {
                #expect(journal.contains("forget path=\(path) all=1"), "the journal records that \(path) was removed")
            }
        }
    }

    /// A file moved into a folder of its own name (`x` republished as `x/y` with the same bytes):
    /// its bytes are reused from the file in the way (copied, which leaves that file unchanged),
    /// which then goes; nothing is fetched.
    @Test func aFileMovedIntoAFolderOfItsNameIsReusedNotFetched() throws {
        let fx = try SyncFixture()
        let shas = try publish(fx, "v0", ["pf"], size: 2_500_000, seed: 1)
        #expect(try fx.sync().exitCode == 0)
        let before = try fx.requests(atLeast: 3).count

        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        fx.manifest.add(path: "pf/inner.bin", size: 2_500_000, sha256: try #require(shas["pf"]), url: fx.server.url("v1/pf/inner.bin"))
        try fx.writeManifest()
        let moved = try fx.sync()
        #expect(moved.exitCode == 0, "\(moved)")
        #expect((try? TestData.sha256(ofFileAt: fx.destPath("pf/inner.bin"))) == shas["pf"])
        #expect(try fx.requestsSoFar().count == before, "the bytes came from the file in the way, not the server")
    }

    /// A kill just before the old file goes, and between its removal and the rename of the new
    /// one: the old file or nothing is at the path, never a wrong file, and the next run converges.
    @Test(arguments: ["turn-before-remove", "turn-before-rename"], [Turn.fileToFolderLarge, Turn.folderToFileLarge])
    func aKillDuringTheTurnNeverLeavesAWrongFile(point: String, turn: Turn) throws {
        let fx = try SyncFixture()
        let old = try publish(fx, "v0", turn.v0, size: 200_000, seed: 1)
        let first = try fx.sync()
        #expect(first.exitCode == 0, "\(first)")

        let shas = try publish(fx, "v1", turn.v1, size: turn.newSize, seed: 11)
        let crashed = try Mirror.run(["sync", fx.manifestPath, "--dest", fx.dest],
                               environment: ["MIRROR_CRASH_AT": point],
                               timeout: 60)
        #expect(crashed.signal == SIGKILL, "the crash point \(point) was reached: \(crashed)")
        for (path, sha) in old {
            let now = try? TestData.sha256(ofFileAt: fx.destPath(path))
            #expect(now == (point == "turn-before-remove" ? sha : nil), "\(path) after a kill at \(point)")
        }
        for (path, sha) in shas {
            #expect((try? TestData.sha256(ofFileAt: fx.destPath(path))) != sha, "\(path) is not in place before its rename")
        }

        let rerun = try fx.sync()
        #expect(rerun.exitCode == 0, "\(rerun)")
        for (path, sha) in shas {
            #expect((try? TestData.sha256(ofFileAt: fx.destPath(path))) == sha, "\(path) holds v1's bytes")
        }
    }

    /// What is in the way and not mirror's own unchanged file: the entry fails (exit 1) with
    /// today's message and the thing in the way is left as it was, with or without `--delete`.
    enum Obstacle: String, CaseIterable, CustomTestStringConvertible, Sendable {
        /// A file the user put where v1 wants a folder.
        case usersFile
        /// v0's file, changed by the user since mirror installed it.
        case changedFile
        /// v0's folder with a file of the user's added to it.
        case usersFileInFolder
        var testDescription: String { rawValue }
    }

    @Test(arguments: Obstacle.allCases, [[], ["--delete"]])
    func anythingElseInTheWayStillBlocks(obstacle: Obstacle, flags: [String]) throws {
        let fx = try SyncFixture()
        let toFolder = obstacle != .usersFileInFolder
        _ = try publish(fx, "v0", obstacle == .usersFile ? [] : toFolder ? ["pf"] : ["pf/a.bin"], size: 200_000, seed: 1)
        let first = try fx.sync(flags)
        #expect(first.exitCode == 0, "\(first)")
        let mine = fx.destPath(toFolder ? "pf" : "pf/notes.txt")
        switch obstacle {
        case .usersFile, .usersFileInFolder:
            try Data("the user's own notes\n".utf8).write(to: URL(fileURLWithPath: mine))
        case .changedFile:
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: mine))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data("edited\n".utf8))
            try handle.close()
        }
        let before = try TestData.sha256(ofFileAt: mine)

        _ = try publish(fx, "v1", toFolder ? ["pf/inner.bin"] : ["pf"], size: 300_000, seed: 11)
        let blocked = try fx.sync(flags)
        #expect(blocked.exitCode == 1, "\(blocked)")
        let message = toFolder ? "is a file, not a folder; move it away" : "is a folder; move it away"
        #expect(blocked.stderr.contains(message) || blocked.stdout.contains(message), "\(blocked)")
        #expect((try? TestData.sha256(ofFileAt: mine)) == before, "the thing in the way is untouched")
        if !toFolder { #expect(fx.exists(fx.destPath("pf/a.bin")), "nothing in the blocking folder was removed") }
    }
}
