import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// `--delete`, `--delete-unlisted` and their guardrails, against nginx (docs/cli.md, "Deleting").
@Suite(.serialized) struct DeletionTests {
    /// A served set whose manifest can list any part of it.
    final class Set {
        let fx: SyncFixture
        var sha: [String: String] = [:]
        let size: Int64 = 3000

        init(_ paths: [String]) throws {
            fx = try SyncFixture()
            for (i, path) in paths.enumerated() { sha[path] = try fx.addFile(path, size: size, seed: UInt64(100 + i)) }
            try fx.writeManifest()
        }

        /// Rewrites the manifest to list exactly `paths`.
        func list(_ paths: [String]) throws {
            fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
            for path in paths { fx.manifest.add(path: path, size: size, sha256: sha[path] ?? "") }
            try fx.writeManifest()
        }

        func has(_ path: String) -> Bool { fx.exists(fx.destPath(path)) }
    }

    static let kept = (1...4).map { "keep/\($0).bin" }
    static let v1 = ["keep.bin", "old.bin", "term1/a.bin", "term1/b.bin", "shared/x.bin", "shared/y.bin"] + kept
    static let v2 = ["keep.bin", "shared/x.bin", "new.bin"] + kept

    /// v1 to v2 drops three files: --delete removes exactly those and the folder they emptied; a
    /// user's own file and `.mirror/` stay. --delete-unlisted then removes the user's file too.
    @Test func deleteRemovesWhatTheManifestDroppedAndNothingElse() throws {
        let set = try Set(Self.v1 + ["new.bin"])
        try set.list(Self.v1)
        #expect(try set.fx.sync().exitCode == 0)
        try TestData.writeFile(at: set.fx.destPath("mine.txt"), size: 10, seed: 9)
        try TestData.writeFile(at: set.fx.destPath("shared/notes.txt"), size: 10, seed: 8)

        try set.list(Self.v2)
        let dry = try set.fx.sync(["--delete", "--dry-run"])
        #expect(dry.exitCode == 0, "\(dry)")
        for path in ["old.bin", "term1/a.bin", "term1/b.bin", "shared/y.bin"] {
            #expect(dry.stdout.contains("delete \(path)"), "\(dry)")
        }
        #expect(set.has("old.bin"), "a dry run deletes nothing")

        let run = try set.fx.sync(["--delete", "--json", "--metrics-file", set.fx.dir.path("m.prom")])
        #expect(run.exitCode == 0, "\(run)")
        for path in ["old.bin", "term1/a.bin", "term1/b.bin", "shared/y.bin", "term1"] { #expect(!set.has(path), "\(path) stays") }
        for path in Self.v2 + ["mine.txt", "shared/notes.txt", ".mirror/journal"] { #expect(set.has(path), "\(path) is gone") }
        let json = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        #expect((json["files"] as? [String: Any])?["deleted"] as? Int == 4, "\(run.stdout)")
        let actions = (json["changed"] as? [[String: Any]] ?? []).filter { $0["action"] as? String == "deleted" }
        #expect(actions.count == 4, "\(run.stdout)")
        let samples = try PrometheusText.parse(try String(contentsOfFile: set.fx.dir.path("m.prom"), encoding: .utf8))
        #expect(PrometheusText.value(samples, "mirror_last_run_deleted_files") == 4)

        let again = try set.fx.sync(["--delete"])
        #expect(again.exitCode == 0 && again.stdout.isEmpty, "a second run has nothing to delete: \(again)")

        let unlisted = try set.fx.sync(["--delete-unlisted"])
        #expect(unlisted.exitCode == 0, "\(unlisted)")
        #expect(!set.has("mine.txt") && !set.has("shared/notes.txt"))
        for path in Self.v2 + [".mirror/journal"] { #expect(set.has(path), "\(path) is gone") }
    }

    /// A manifest with no files, and one shrunk by 90 %, delete nothing and exit 1 with the count.
    @Test func anEmptyOrShrunkManifestDeletesNothing() throws {
        let paths = (0..<20).map { "f\($0).bin" }
        let set = try Set(paths)
        #expect(try set.fx.sync().exitCode == 0)

        try set.list([])
        let empty = try set.fx.sync(["--delete"])
        #expect(empty.exitCode == 1, "\(empty)")
        #expect(empty.stderr.contains("lists no files"), "\(empty)")
        #expect(paths.allSatisfy(set.has))

        try set.list(Array(paths.prefix(2)))
        let shrunk = try set.fx.sync(["--delete", "--json"])
        #expect(shrunk.exitCode == 1, "\(shrunk)")
        #expect(shrunk.stderr.contains("would delete 18 of 20 files"), "\(shrunk)")
        #expect(shrunk.stdout.contains("\"deletion_refused\""), "\(shrunk)")
        #expect(paths.allSatisfy(set.has))

        let allowed = try set.fx.sync(["--delete", "--max-delete", "18"])
        #expect(allowed.exitCode == 0, "\(allowed)")
        #expect(paths.filter(set.has) == Array(paths.prefix(2)))
    }

    /// A file changed after mirror installed it, and a file mirror only found in place (adopted),
    /// are never deleted; the changed one is named in a warning.
    @Test func aChangedOrAdoptedFileIsKept() throws {
        let set = try Set(["a.bin", "b.bin", "c.bin", "d.bin"])
        // c.bin is in place before the first run: mirror checks it and never installs it.
        try FileManager.default.createDirectory(atPath: set.fx.dest, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: set.fx.www + "/c.bin", toPath: set.fx.destPath("c.bin"))
        #expect(try set.fx.sync().exitCode == 0)
        let handle = try #require(FileHandle(forWritingAtPath: set.fx.destPath("b.bin")))
        handle.seekToEndOfFile()
        handle.write(Data("edited".utf8))
        handle.closeFile()

        try set.list(["d.bin"])
        let run = try set.fx.sync(["--delete", "--max-delete", "100%"])
        #expect(run.exitCode == 0, "\(run)")
        #expect(!set.has("a.bin"))
        #expect(set.has("b.bin") && set.has("c.bin"))
        #expect(run.stderr.contains("kept") && run.stderr.contains("b.bin"), "\(run)")
    }

    /// A run in which a listed file fails deletes nothing; the next complete run does.
    @Test func aRunWithAFailureDeletesNothing() throws {
        let set = try Set(["a.bin", "b.bin", "c.bin", "d.bin"])
        #expect(try set.fx.sync().exitCode == 0)
        set.fx.manifest = ManifestBuilder(baseURL: set.fx.server.baseURL)
        set.fx.manifest.add(path: "a.bin", size: set.size, sha256: set.sha["a.bin"] ?? "")
        set.fx.manifest.add(path: "missing.bin", size: 10, sha256: String(repeating: "ab", count: 32))
        try set.fx.writeManifest()
        let failed = try set.fx.sync(["--delete", "--retries", "0"])
        #expect(failed.exitCode == 1, "\(failed)")
        #expect(set.has("b.bin"), "a run with a failure deleted a file")

        try set.list(["a.bin", "b.bin"])
        let done = try set.fx.sync(["--delete"])
        #expect(done.exitCode == 0, "\(done)")
        #expect(!set.has("c.bin") && !set.has("d.bin") && set.has("b.bin"))
    }

    /// A 32 MiB set for a 20 MiB file system: exit 73 before any request, with both sizes.
    @Test func aSetThatCannotFitEndsBeforeTheFirstRequest() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 16 << 20, seed: 1)
        try fx.addFile("b.bin", size: 16 << 20, seed: 2)
        try fx.writeManifest()
        let mount = fx.dir.path("small")
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: true)
        let mounted = try ChildProcess.run("/bin/mount", ["-t", "tmpfs", "-o", "size=20m", "tmpfs", mount], timeout: 10)
        guard mounted.exitCode == 0 else {
            print("skipped: cannot mount a 20 MiB tmpfs here (\(mounted.stderr))")
            return
        }
        defer { _ = try? ChildProcess.run("/bin/umount", [mount], timeout: 10) }
        let run = try Mirror.run(["sync", fx.manifestPath, "--dest", mount + "/dest"], timeout: 60)
        #expect(run.exitCode == 73, "\(run)")
        // 20 MiB less the journal's reserve (64 KiB past its end, docs/journal.md "A full disk").
        #expect(run.stderr.contains("need 32.0 MiB") && run.stderr.contains("19.9 MiB free"), "\(run)")
        #expect(try fx.requestsSoFar().isEmpty, "a request was sent")
    }

    /// A chain of folders 25,000 deep in DEST, its full path far past PATH_MAX, with files at
    /// several depths: --delete-unlisted removes all of it under `ulimit -n 64` (no recursion, no
    /// descriptor per level) and exits 0; the listed file and `.mirror/` stay.
    @Test func deleteUnlistedRemovesAChainOfFolders25000Deep() throws {
        let set = try Set(["keep.bin"])
        #expect(try set.fx.sync().exitCode == 0)
        try DeepChain.make(in: set.fx.dest, depth: 25_000, fileDepths: [1, 2, 12_345, 25_000])
        defer { DeepChain.remove(in: set.fx.dest) }
        let run = try ChildProcess.run("/bin/sh", ["-c", "ulimit -n 64 && exec \"$0\" \"$@\"", try MirrorBinary.path(),
                                                   "sync", set.fx.manifestPath, "--dest", set.fx.dest, "--delete-unlisted",
                                                   "--max-delete", "100%", "--summary"],
                                       environment: SyncFixture.loopbackOnly, timeout: 300)
        #expect(run.exitCode == 0, "\(run)")
        #expect(run.stdout.contains("4 deleted"), "\(run)")
        #expect(DeepChain.depth(in: set.fx.dest) == 0)
        #expect(set.has("keep.bin") && set.has(".mirror/journal"))
    }

    /// The same chain with no file in it: nothing to delete but empty folders, which
    /// --delete-unlisted removes too ("files, links and empty folders"); an empty manifest still
    /// deletes nothing, not even an empty folder.
    @Test func deleteUnlistedRemovesEmptyFoldersWhenNoFileIsUnlisted() throws {
        let set = try Set(["keep.bin"])
        #expect(try set.fx.sync().exitCode == 0)
        try DeepChain.make(in: set.fx.dest, depth: 25_000, fileDepths: [])
        defer { DeepChain.remove(in: set.fx.dest) }
        let run = try set.fx.sync(["--delete-unlisted", "--summary"])
        #expect(run.exitCode == 0, "\(run)")
        #expect(DeepChain.depth(in: set.fx.dest) == 0, "an empty chain of folders stayed")
        #expect(set.has("keep.bin") && set.has(".mirror/journal"))
    }
}
