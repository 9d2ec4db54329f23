import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// Where options meet: filters and a stale building folder, a first `--atomic` run on a folder
/// holding a user's file, and a manifest that only changes a file's `mode` or `mtime`
/// (docs/cli.md, "Atomic destinations", "Choosing what a machine syncs", "Deleting"). Each run is
/// the built `mirror` against nginx on 127.0.0.1.
@Suite(.serialized) struct OptionsMeetTests {
    static let old = 1_000, new = 1_001

    /// Lists `files` (path, size, seed) in a fresh manifest, serving each one whose seed is given.
    static func publish(_ fx: SyncFixture, _ files: [(String, Int, UInt64)], extra: [String: [String: String]] = [:]) throws {
        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        for (path, size, seed) in files {
            fx.manifest.add(path: path, size: Int64(size), sha256: TestData.sha256(of: TestData.bytes(count: size, seed: seed)),
                            extra: extra[path] ?? [:])
        }
        try fx.writeManifest()
    }

    static func mode(_ path: String) -> UInt32? {
        var st = stat()
        return lstat(path, &st) == 0 ? UInt32(st.st_mode) & 0o7777 : nil
    }

    static func mtime(_ path: String) -> Int? {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_mtim.tv_sec : nil
    }

    /// A run left `building/` holding a newer version of a path and a path only that manifest
    /// lists; a later run that leaves both out publishes the current set's version of the first
    /// and nothing at the second: a published generation is the selected set plus the current
    /// set's left-out files, never what a stopped build left.
    @Test func aLeftOutPathIsTheCurrentSetsNotWhatAStoppedBuildLeft() throws {
        let fx = try SyncFixture()
        try TestData.writeFile(at: fx.www + "/deep.txt", size: 1_000, seed: 1)
        try TestData.writeFile(at: fx.www + "/keep.bin", size: 1_000, seed: 2)
        try Self.publish(fx, [("deep.txt", 1_000, 1), ("keep.bin", 1_000, 2)])
        let first = try fx.sync(["--atomic"])
        #expect(first.exitCode == 0, "\(first)")

        // v1: deep.txt changes, only1.bin appears, big.bin is listed before the server has it.
        try TestData.writeFile(at: fx.www + "/deep.txt", size: 1_000, seed: 3)
        try TestData.writeFile(at: fx.www + "/new/only1.bin", size: 1_000, seed: 4)
        try Self.publish(fx, [("deep.txt", 1_000, 3), ("keep.bin", 1_000, 2), ("new/only1.bin", 1_000, 4), ("big.bin", 5_000, 5)])
        let stopped = try fx.sync(["--atomic", "--retries", "0"])
        #expect(stopped.exitCode == 1, "\(stopped)")
        let building = fx.dest + ".generations/building/"
        #expect(fx.exists(building + "deep.txt") && fx.exists(building + "new/only1.bin"), "the premise: the failed run left them")

        try TestData.writeFile(at: fx.www + "/big.bin", size: 5_000, seed: 5)
        let run = try fx.sync(["--atomic", "--exclude", "deep.txt", "--exclude", "new/"])
        #expect(run.exitCode == 0, "\(run)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("deep.txt")) == TestData.sha256(of: TestData.bytes(count: 1_000, seed: 1)),
                "a left-out path holds what a stopped build left, not the current set's file")
        #expect(!fx.exists(fx.destPath("new/only1.bin")), "a path the filter leaves out and the current set lacks was published")
        #expect(fx.exists(fx.destPath("big.bin")) && fx.exists(fx.destPath("keep.bin")))
    }

    /// A first `--atomic` run on a plain DEST that holds a file mirror never installed changes
    /// nothing and says which file and which option lets the conversion drop it; with
    /// `--delete-unlisted` it converts. A plain run meanwhile stays plain.
    @Test func aFirstAtomicRunNeverDeletesAUsersFile() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 10_000, seed: 1)
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 0)
        let notes = fx.destPath("local-notes.txt")
        try Data("mine".utf8).write(to: URL(fileURLWithPath: notes))

        let dry = try fx.sync(["--atomic", "--dry-run"])
        #expect(dry.exitCode == 1 && dry.stderr.contains("local-notes.txt") && !dry.stdout.contains("delete local-notes.txt"), "\(dry)")
        let refused = try fx.sync(["--atomic"])
        #expect(refused.exitCode == 1, "\(refused)")
        #expect(refused.stderr.contains("local-notes.txt") && refused.stderr.contains("--delete-unlisted"), "\(refused)")
        #expect(!refused.stdout.contains("deleted"), "\(refused)")
        var st = stat()
        #expect(lstat(fx.dest, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR, "DEST was converted")
        #expect(fx.exists(notes), "the user's file is gone")

        let plain = try fx.sync()
        #expect(plain.exitCode == 0, "\(plain)")
        #expect(lstat(fx.dest, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR, "a plain run converted DEST")

        let allowed = try fx.sync(["--atomic", "--delete-unlisted"])
        #expect(allowed.exitCode == 0, "\(allowed)")
        #expect(lstat(fx.dest, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK, "DEST is not a symlink")
        #expect(!fx.exists(notes) && fx.exists(fx.destPath("a.bin")))

        // A folder mirror never synced, holding a file of its owner's, is not made atomic either.
        let fresh = fx.dir.path("fresh")
        try FileManager.default.createDirectory(atPath: fresh, withIntermediateDirectories: true)
        try Data("theirs".utf8).write(to: URL(fileURLWithPath: fresh + "/own.txt"))
        let first = try Mirror.run(["sync", fx.manifestPath, "--dest", fresh, "--atomic"], timeout: 60)
        #expect(first.exitCode == 1 && first.stderr.contains("own.txt"), "\(first)")
        #expect(fx.exists(fresh + "/own.txt") && lstat(fresh, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR)
    }

    /// Another DEST inside a plain one (docs/cli.md, "Deleting": nested destinations stay whole)
    /// is never dropped by the first `--atomic` run, not even with `--delete-unlisted` and no
    /// deletion limit: a generation cannot hold it, so the conversion is refused and names it.
    @Test func aConversionNeverDropsANestedDestination() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 10_000, seed: 1)
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 0)
        let inner = fx.destPath("lab/inner")
        let nested = try Mirror.run(["sync", fx.manifestPath, "--dest", inner], timeout: 60)
        #expect(nested.exitCode == 0, "\(nested)")

        for extra in [[], ["--delete-unlisted", "--max-delete", "100%"], ["--delete-unlisted", "--max-delete", "100%", "--dry-run"]] {
            let refused = try fx.sync(["--atomic"] + extra)
            #expect(refused.exitCode == 1, "\(extra): \(refused)")
            #expect(refused.stderr.contains("another mirror destination (lab/inner)") && !refused.stderr.contains(".mirror/journal"), "\(extra): \(refused)")
            var st = stat()
            #expect(lstat(fx.dest, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR, "\(extra): DEST was converted")
            #expect(fx.exists(inner + "/a.bin") && fx.exists(inner + "/.mirror/journal"), "\(extra): the nested DEST lost files")
        }
        let again = try Mirror.run(["sync", fx.manifestPath, "--dest", inner, "--json"], timeout: 60)
        #expect(again.exitCode == 0 && FaultFixture.json(again)?["bytes_transferred"] as? Int == 0, "\(again)")
    }

    /// A manifest that gives the same bytes an `mtime` sets it, as `rsync -t` would; in an atomic
    /// DEST the new generation gets a file of its own and the published one keeps its time.
    @Test(arguments: [false, true]) func aNewModificationTimeIsSetOnUnchangedBytes(atomic: Bool) throws {
        let fx = try SyncFixture()
        let options = atomic ? ["--atomic"] : []
        try TestData.writeFile(at: fx.www + "/clip.bin", size: 20_000, seed: 1)
        try Self.publish(fx, [("clip.bin", 20_000, 1)])
        #expect(try fx.sync(options).exitCode == 0)
        let published = atomic ? try FileManager.default.destinationOfSymbolicLink(atPath: fx.dest) : nil
        let store = (fx.dest as NSString).deletingLastPathComponent + "/"
        let before = Self.mtime(fx.destPath("clip.bin"))

        try Self.publish(fx, [("clip.bin", 20_000, 1)], extra: ["clip.bin": ["mtime": "2020-09-13T12:26:40Z"]])
        let run = try fx.sync(options)
        #expect(run.exitCode == 0, "\(run)")
        #expect(Self.mtime(fx.destPath("clip.bin")) == 1_600_000_000, "the manifest's mtime was not applied")
        if let published {
            #expect(Self.mtime(store + published + "/clip.bin") == before, "a published generation changed")
        }
        let again = try fx.sync(options + ["--json"])
        #expect(again.exitCode == 0 && again.stdout.contains("\"up_to_date\":1"), "\(again)")
    }

    /// A file mirror installed whose `mode` the manifest then changes stays mirror's: `--delete`
    /// removes it once the manifest drops it.
    @Test func aModeChangeKeepsTheFileMirrors() throws {
        let fx = try SyncFixture()
        try TestData.writeFile(at: fx.www + "/keep.txt", size: 3_000, seed: 1)
        try TestData.writeFile(at: fx.www + "/other.txt", size: 3_000, seed: 2)
        try Self.publish(fx, [("keep.txt", 3_000, 1), ("other.txt", 3_000, 2)])
        #expect(try fx.sync().exitCode == 0)
        try Self.publish(fx, [("keep.txt", 3_000, 1), ("other.txt", 3_000, 2)], extra: ["keep.txt": ["mode": "\"0640\""]])
        let changed = try fx.sync()
        #expect(changed.exitCode == 0 && Self.mode(fx.destPath("keep.txt")) == 0o640, "\(changed)")

        try Self.publish(fx, [("other.txt", 3_000, 2)])
        let deleted = try fx.sync(["--delete", "--max-delete", "100%"])
        #expect(deleted.exitCode == 0, "\(deleted)")
        #expect(!fx.exists(fx.destPath("keep.txt")), "mirror forgot it installed keep.txt")
    }
}

/// `status` after a run that never ended: it says the last run was interrupted, when it started,
/// and that the next sync goes on from there; a stray `building/` with nothing running is not
/// "being built". Once a run ends, the interruption is no longer reported.
@Suite(.serialized) struct InterruptedRunStatusTests {
    func status(_ fx: SyncFixture, _ extra: [String] = []) throws -> ProcessResult {
        try Mirror.run(["status", fx.manifestPath, "--dest", fx.dest] + extra, timeout: 60)
    }

    @Test(arguments: [false, true]) func statusSaysTheLastRunWasInterrupted(atomic: Bool) throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "1m"))
        try fx.addFile("small.bin", size: 1_000, seed: 1)
        try fx.writeManifest()
        let options = atomic ? ["--atomic"] : []
        #expect(try fx.sync(options).exitCode == 0)
        try fx.addFile("big.bin", size: 8 << 20, seed: 2)
        try fx.writeManifest()

        let victim = try fx.startSync(options)
        let state = atomic ? fx.dest + ".generations/.mirror" : fx.destPath(".mirror")
        let partial = state + "/partial/" + PartialFile.name(for: "big.bin")
        try Wait.until("big.bin is being downloaded", timeout: 60) { fx.size(of: partial) > 0 || !victim.isRunning }
        try #require(victim.isRunning, "the sync ended before it could be killed")
        victim.signal(SIGKILL)
        _ = try victim.wait(timeout: 10)

        let text = try status(fx)
        #expect(text.stdout.contains("last run: started ") && text.stdout.contains("(pid \(victim.pid)), interrupted"), "\(text)")
        #expect(text.stdout.contains("the next sync goes on from where it left off"), "\(text)")
        #expect(text.stdout.contains("run before it: ") && !text.stdout.contains("none recorded"), "\(text)")
        if atomic {
            #expect(!text.stdout.contains("the next one is being built"), "\(text)")
            #expect(text.stdout.contains("partly built by a run that did not finish"), "\(text)")
        }
        let json = try status(fx, ["--json"])
        let object = try #require(FaultFixture.json(json), "\(json)")
        let interrupted = try #require(object["interrupted_run"] as? [String: Any], "\(json.stdout)")
        #expect(interrupted["pid"] as? Int == Int(victim.pid))

        #expect(try fx.sync(options).exitCode == 0)
        let after = try status(fx, ["--json"])
        #expect(try #require(FaultFixture.json(after))["interrupted_run"] is NSNull, "\(after.stdout)")
        #expect(!(try status(fx)).stdout.contains("interrupted"))
    }
}

/// What `verify` finds, the next `sync` acts on: bytes changed in place with the size and
/// modification time put back pass a sync's `stat` compare, so `verify` makes the journal forget
/// them; `status` then calls the file `unverified` and the next sync fetches it again. A mode or
/// time that is not the manifest's is a problem of its own (`attributes`), which sync sets.
@Suite(.serialized) struct VerifyThenSyncTests {
    @Test func aFileVerifyFoundCorruptIsFetchedByTheNextSync() throws {
        let fx = try SyncFixture()
        try fx.addFile("clip.bin", size: 50_000, seed: 1)
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 0)
        let path = fx.destPath("clip.bin")
        var before = stat()
        #expect(stat(path, &before) == 0)
        // One byte changed in place; the size and modification time put back.
        let fd = open(path, O_WRONLY)
        #expect(fd >= 0 && pwrite(fd, "X", 1, 20_000) == 1)
        close(fd)
        var times = [timespec(tv_sec: 0, tv_nsec: Int((1 << 30) - 2)), before.st_mtim]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        let unnoticed = try fx.sync(["--json"])
        #expect(unnoticed.exitCode == 0 && unnoticed.stdout.contains("\"up_to_date\":1"), "the premise: a sync trusts it \(unnoticed)")

        let verify = try Mirror.run(["verify", fx.manifestPath, "--dest", fx.dest, "--json"], timeout: 60)
        #expect(verify.exitCode == 1, "\(verify)")
        let document = try #require(FaultFixture.json(verify), "\(verify)")
        #expect(document["recorded"] as? Int == 1, "\(verify.stdout)")
        let status = try Mirror.run(["status", fx.manifestPath, "--dest", fx.dest], timeout: 60)
        #expect(status.stdout.contains("unverified"), "\(status)")

        let repaired = try fx.sync()
        #expect(repaired.exitCode == 0, "\(repaired)")
        #expect(try TestData.sha256(ofFileAt: path) == TestData.sha256(of: TestData.bytes(count: 50_000, seed: 1)))
        let again = try Mirror.run(["verify", fx.manifestPath, "--dest", fx.dest], timeout: 60)
        #expect(again.exitCode == 0, "\(again)")
    }

    @Test func aModeOrTimeThatIsNotTheManifestsIsAVerifyProblemThatSyncFixes() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.txt", size: 3_000, seed: 1)
        try fx.writeManifest()
        try OptionsMeetTests.publish(fx, [("a.txt", 3_000, 1)],
                                     extra: ["a.txt": ["mode": "\"0640\"", "mtime": "2020-09-13T12:26:40Z"]])
        #expect(try fx.sync().exitCode == 0)
        #expect(chmod(fx.destPath("a.txt"), 0o600) == 0)
        let verify = try Mirror.run(["verify", fx.manifestPath, "--dest", fx.dest, "--json"], timeout: 60)
        #expect(verify.exitCode == 1, "\(verify)")
        let problems = try #require(FaultFixture.json(verify)?["problems"] as? [[String: Any]], "\(verify)")
        #expect(problems.first?["state"] as? String == "attributes", "\(verify.stdout)")
        #expect((problems.first?["error"] as? String)?.contains("mode 600, expected 640") == true, "\(verify.stdout)")
        #expect(try fx.sync().exitCode == 0)
        let again = try Mirror.run(["verify", fx.manifestPath, "--dest", fx.dest], timeout: 60)
        #expect(again.exitCode == 0, "\(again)")
    }
}

/// A run killed after an install's rename or link and before the batch's journal records: the
/// file at the path is mirror's all the same. A path that then turns (file to folder) replaces it,
/// and a run of the same manifest records it as installed, so `--delete` removes it later.
@Suite(.serialized) struct KilledInstallTests {
    /// The small file `x` installed by a run killed at `install-before-record`.
    static func killedInstall(size: Int) throws -> SyncFixture {
        let fx = try SyncFixture()
        try TestData.writeFile(at: fx.www + "/x", size: Int64(size), seed: 1)
        try TestData.writeFile(at: fx.www + "/keep.bin", size: 3_000, seed: 2)
        try OptionsMeetTests.publish(fx, [("x", size, 1), ("keep.bin", 3_000, 2)])
        let crashed = try Mirror.run(["sync", fx.manifestPath, "--dest", fx.dest, "--jobs", "1"],
                                     environment: ["MIRROR_CRASH_AT": "install-before-record"], timeout: 60)
        #expect(crashed.signal == SIGKILL, "the crash point was reached: \(crashed)")
        return fx
    }

    @Test(arguments: [2_000, 3 << 20]) func aPathThatTurnsReplacesAFileWhoseRecordAKillLost(size: Int) throws {
        let fx = try Self.killedInstall(size: size)
        try #require(fx.exists(fx.destPath("x")), "the premise: the killed run installed x")
        try FileManager.default.removeItem(atPath: fx.www + "/x")
        try TestData.writeFile(at: fx.www + "/x/y", size: 2_000, seed: 3)
        try OptionsMeetTests.publish(fx, [("x/y", 2_000, 3), ("keep.bin", 3_000, 2)])
        let turned = try fx.sync()
        #expect(turned.exitCode == 0, "\(turned)")
        #expect(fx.exists(fx.destPath("x/y")))
    }

    @Test func aFileWhoseRecordAKillLostStaysMirrorsForDelete() throws {
        let fx = try Self.killedInstall(size: 2_000)
        try #require(fx.exists(fx.destPath("x")), "the premise: the killed run installed x")
        #expect(try fx.sync().exitCode == 0)
        try OptionsMeetTests.publish(fx, [("keep.bin", 3_000, 2)])
        let deleted = try fx.sync(["--delete", "--max-delete", "100%"])
        #expect(deleted.exitCode == 0 && !fx.exists(fx.destPath("x")), "\(deleted)")
    }
}
