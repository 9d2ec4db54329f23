#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorTestSupport

/// The crash-state explorer's scenarios (docs/journal.md, "Power loss, as the tests model it"),
/// each a run whose every power-cut state is checked: what it leads up to, and the run recorded.
enum CrashScenarios {
    static func files(_ count: Int, prefix: String, seed: UInt64, sizes: ClosedRange<Int> = 1...24_000) -> [(path: String, size: Int64, seed: UInt64)] {
        var rng = SeededRandom(seed: seed)
        return (0..<count).map { i in
            (path: "\(prefix)/\(i / 10)/f\(i).bin", size: Int64(rng.inRange(sizes)), seed: seed &* 1000 &+ UInt64(i))
        }
    }

    static func expectExit(_ result: ProcessResult, _ codes: Set<Int32> = [0], _ what: String) throws {
        guard codes.contains(result.exitCode) else { throw CrashTraceError("\(what) exited \(result.exitCode): \(result.stderr)") }
    }

    /// Publishes `version` and syncs it, which must exit 0 (`what` names the sync in a failure):
    /// a version every scenario's world holds before the run it records.
    static func publishAndSync(_ world: CrashWorld, _ version: [(path: String, size: Int64, seed: UInt64)], _ what: String) throws {
        try world.publish(version)
        try expectExit(try world.sync(), [0], what)
    }

    /// A first sync of many small files: every file through the install batches' group commit.
    static let groupCommit = CrashScenario(name: "firstSyncOfManySmallFiles", prepare: { world in
        try world.publish(files(48, prefix: "small", seed: 1))
    }, recorded: { world in ["sync", world.fx.manifestPath, "--dest", world.dest] })

    /// A large file in four segments, killed half-way and resumed: the resumed run is recorded.
    static let resumedSegments = CrashScenario(name: "resumedSegmentedLargeFile", prepare: { world in
        world.syncOptions = ["--segments", "4", "--segments-above", "2M"]
        try world.publish([(path: "big/image.bin", size: 6 << 20, seed: 7), (path: "small.txt", size: 3000, seed: 8)])
        try killOnceJournaled(world, "a segmented partial record of image.bin", containing: "segs=")
    }, recorded: { world in ["sync", world.fx.manifestPath, "--dest", world.dest] + world.syncOptions },
       limitRate: "4m", environment: ["MIRROR_TEST_CHECKPOINT_SECONDS": "0.2"],
       regressions: [
        // The file complete, synced and sealed with the manifest's mode (`fchmod`), the rename
        // not made: the next run refused the partial file (not mode 0600) and fetched it all again.
        .init(name: "sealed, not yet renamed") { $0.kind == "rename" && ($0["to"] ?? "").hasSuffix("/big/image.bin") },
       ])

    /// `--delete`: a version drops, changes and adds files; the files it drops are removed.
    static let deletion = CrashScenario(name: "deleteRun", prepare: { world in
        let v1 = files(30, prefix: "d", seed: 3)
        try publishAndSync(world, v1, "the first sync")
        var v2 = Array(v1.dropFirst(10))
        for i in 0..<5 { v2[i].seed += 500 }
        v2 += files(5, prefix: "new", seed: 4)
        try removeServed(world, except: v2)
        try world.publish(v2)
    }, recorded: { world in ["sync", world.fx.manifestPath, "--dest", world.dest, "--delete"] })

    /// An atomic DEST publishes a third version with `--keep 1`: the oldest generation is pruned.
    static let atomicPublish = CrashScenario(name: "atomicPublishWithPruning", prepare: { world in
        world.atomic = true
        world.syncOptions = ["--atomic", "--keep", "1"]
        let v1 = files(16, prefix: "a", seed: 5)
        try publishAndSync(world, v1, "the first atomic sync")
        var v2 = v1
        for i in 0..<4 { v2[i].seed += 700 }
        try publishAndSync(world, v2, "the second atomic sync")
        var v3 = Array(v2.dropFirst(2))
        for i in 4..<8 { v3[i].seed += 900 }
        v3 += files(3, prefix: "b", seed: 6)
        try removeServed(world, except: v3)
        try world.publish(v3)
    }, recorded: { world in ["sync", world.fx.manifestPath, "--dest", world.dest] + world.syncOptions })

    /// `mirror rollback` of an atomic DEST to its previous generation (and its hold).
    static let rollback = CrashScenario(name: "rollback", prepare: { world in
        world.atomic = true
        world.syncOptions = ["--atomic"]
        let v1 = files(12, prefix: "r", seed: 9)
        try publishAndSync(world, v1, "the first atomic sync")
        var v2 = v1
        for i in 0..<5 { v2[i].seed += 300 }
        try publishAndSync(world, v2, "the second atomic sync")
    }, recorded: { world in ["rollback", "--dest", world.dest] }, rollbackAfter: true)

    /// A journal past its bound is compacted at the start of a sync that then installs files.
    static let compaction = CrashScenario(name: "journalCompaction", prepare: { world in
        let v1 = files(10, prefix: "c", seed: 10)
        try publishAndSync(world, v1, "the first sync")
        // Past 1.5 x entries + 256 lines (docs/journal.md, rule 5): run records, as many runs would leave.
        var lines = ""
        for i in 0..<320 {
            let body = "run start=\(1_795_000_000 + i) end=\(1_795_000_001 + i) result=ok downloaded=0 failed=0 bytes=0"
            lines += String(format: "%08x", CRC32.of(Array(body.utf8))) + " " + body + "\n"
        }
        let journal = try FileHandle(forWritingTo: URL(fileURLWithPath: world.dest + "/.mirror/journal"))
        journal.seekToEndOfFile()
        journal.write(Data(lines.utf8))
        journal.closeFile()
        var v2 = v1
        for i in 0..<3 { v2[i].seed += 100 }
        try world.publish(v2)
    }, recorded: { world in ["sync", world.fx.manifestPath, "--dest", world.dest] })

    /// A plain DEST converted to an atomic one by its first `--atomic` sync (with a new version).
    static let conversion = CrashScenario(name: "conversionToAtomic", prepare: { world in
        let v1 = files(14, prefix: "p", seed: 11)
        try publishAndSync(world, v1, "the plain sync")
        var v2 = v1
        for i in 0..<3 { v2[i].seed += 200 }
        try world.publish(v2)
        world.atomic = true
        world.syncOptions = ["--atomic"]
    }, recorded: { world in ["sync", world.fx.manifestPath, "--dest", world.dest] + world.syncOptions })

    /// A chunk delta: DEST holds v1 of a 3 MiB file published with chunk indexes; v2 changes
    /// three 4 KiB blocks, and the recorded sync copies the unchanged chunks from v1 and fetches
    /// the rest.
    static let chunkDelta = CrashScenario(name: "chunkDelta", prepare: { world in
        let v1 = TestData.bytes(count: 3 << 20, seed: 12)
        let publisher = ["--chunks", "--chunks-above", "1M"]
        try world.publishCreated(["img/lab.img": v1, "notes.txt": TestData.bytes(count: 2000, seed: 13)], publisher: publisher)
        try expectExit(try world.sync(), [0], "the first sync")
        var v2 = v1
        for (i, at) in [300_000, 1_500_000, 2_900_000].enumerated() {
            v2.replaceSubrange(at..<(at + 4096), with: TestData.bytes(count: 4096, seed: 20 + UInt64(i)))
        }
        try world.publishCreated(["img/lab.img": v2, "notes.txt": TestData.bytes(count: 2000, seed: 13)], publisher: publisher)
    }, recorded: { world in ["sync", world.fx.manifestPath, "--dest", world.dest] })

    /// A no-op: nothing changed since the last sync. The run takes DEST's lock and reads its
    /// journal while the manifest is read (the early lock), plans every entry up to date on the
    /// no-op path, writes its run record and empties the lock file.
    static let noOp = CrashScenario(name: "noOpRun", prepare: { world in
        try publishAndSync(world, files(20, prefix: "n", seed: 14), "the first sync")
    }, recorded: { world in ["sync", world.fx.manifestPath, "--dest", world.dest] })

    /// An atomic no-op: the current generation is found complete (each entry's `stat` against
    /// its record, then a count of the set's files) and nothing is built.
    static let atomicNoOp = CrashScenario(name: "atomicNoOp", prepare: { world in
        world.atomic = true
        world.syncOptions = ["--atomic"]
        try publishAndSync(world, files(16, prefix: "an", seed: 15), "the first atomic sync")
    }, recorded: { world in ["sync", world.fx.manifestPath, "--dest", world.dest] + world.syncOptions })

    /// A large file in one stream, killed after a checkpoint and resumed: the resumed run restores
    /// the saved hash state over the very partial file (docs/journal.md, rule 8) and is recorded.
    static let resumedOneStream = CrashScenario(name: "resumedOneStream", prepare: { world in
        world.syncOptions = ["--segments", "1"]
        try world.publish([(path: "big/one.bin", size: 6 << 20, seed: 16), (path: "small.txt", size: 2000, seed: 17)])
        try killOnceJournaled(world, "a partial record of one.bin with a hash state", containing: "h256=")
    }, recorded: { world in ["sync", world.fx.manifestPath, "--dest", world.dest] + world.syncOptions },
       limitRate: "4m", environment: ["MIRROR_TEST_CHECKPOINT_SECONDS": "0.2"])

    /// A large file in four segments for an atomic DEST's next generation, killed half-way and
    /// resumed: the resumed run finishes it in `building/`, links the rest from the current set
    /// and publishes the generation (recorded).
    static let resumedSegmentsAtomic = CrashScenario(name: "resumedSegmentsIntoAGeneration", prepare: { world in
        world.atomic = true
        world.syncOptions = ["--atomic", "--segments", "4", "--segments-above", "2M"]
        let small = files(6, prefix: "g", seed: 19)
        try publishAndSync(world, small, "the first atomic sync")
        try world.publish(small + [(path: "big/image.bin", size: 6 << 20, seed: 20)])
        try killOnceJournaled(world, "a segmented partial record of image.bin", containing: "segs=")
    }, recorded: { world in ["sync", world.fx.manifestPath, "--dest", world.dest] + world.syncOptions },
       limitRate: "4m", environment: ["MIRROR_TEST_CHECKPOINT_SECONDS": "0.2"])

    /// A plain DEST holding a file of the user's becomes atomic with `--delete-unlisted`, which
    /// lets the conversion drop it (docs/cli.md, "Atomic destinations"), with a new version.
    static let conversionDroppingUsersFile = CrashScenario(name: "conversionDroppingUsersFile", prepare: { world in
        let v1 = files(12, prefix: "u", seed: 18)
        try publishAndSync(world, v1, "the plain sync")
        try FileManager.default.createDirectory(atPath: world.dest + "/notes", withIntermediateDirectories: true)
        try Data("the user's".utf8).write(to: URL(fileURLWithPath: world.dest + "/notes/mine.txt"))
        var v2 = v1
        for i in 0..<2 { v2[i].seed += 400 }
        try world.publish(v2)
        world.atomic = true
        world.syncOptions = ["--atomic", "--delete-unlisted", "--max-delete", "100%"]
    }, recorded: { world in ["sync", world.fx.manifestPath, "--dest", world.dest] + world.syncOptions })

    /// A signed manifest with a higher serial (docs/signing.md, "Versions"): the recorded run
    /// records serial 2 in the state folder (replaced whole: a temporary file, `fsync`, `rename`,
    /// `fsync` of the folder) before it fetches anything. No power-cut state may leave a serial the
    /// next run cannot read, nor one that refuses the manifest the run was recording.
    static let signedSerial = CrashScenario(name: "signedManifestSerial", prepare: { world in
        let key = world.fx.dir.path("signing.pem"), trusted = world.fx.dir.path("signing.pub")
        try TestKeys.openssl(["genpkey", "-algorithm", "ed25519", "-out", key])
        try TestKeys.openssl(["pkey", "-in", key, "-pubout", "-out", trusted])
        func publishSigned(_ files: [String: [UInt8]], serial: Int) throws {
            try world.publishCreated(files, publisher: ["--serial", "\(serial)", "--expires", "30d"])
            try expectExit(try world.run(["manifest", "sign", world.fx.manifestPath, "--key", key]), [0], "manifest sign")
        }
        world.syncOptions = ["--trust", trusted]
        let notes = TestData.bytes(count: 2000, seed: 21)
        try publishSigned(["s/one.bin": TestData.bytes(count: 30_000, seed: 22), "notes.txt": notes], serial: 1)
        try expectExit(try world.sync(), [0], "the first signed sync")
        try publishSigned(["s/one.bin": TestData.bytes(count: 30_000, seed: 23), "notes.txt": notes,
                           "s/two.bin": TestData.bytes(count: 12_000, seed: 24)], serial: 2)
    }, recorded: { world in ["sync", world.fx.manifestPath, "--dest", world.dest] + world.syncOptions })

    /// Starts a sync of `world` that checkpoints every 0.2 s and kills it (SIGKILL) once the
    /// journal holds a `partial` record with `containing` in it (or the run ended).
    static func killOnceJournaled(_ world: CrashWorld, _ what: String, containing: String) throws {
        let run = try Mirror.start(["sync", world.fx.manifestPath, "--dest", world.dest] + world.syncOptions,
                                   environment: ["MIRROR_TEST_CHECKPOINT_SECONDS": "0.2"])
        defer { run.signal(SIGKILL) }
        try Wait.until(what, timeout: 60) {
            let journal = (try? String(contentsOfFile: world.stateFolder + "/journal", encoding: .utf8)) ?? ""
            return journal.contains(" partial ") && journal.contains(containing) || !run.isRunning
        }
        run.signal(SIGKILL)
        _ = try run.wait(timeout: 30)
    }

    /// Removes the served files no longer listed (the server moved on).
    static func removeServed(_ world: CrashWorld, except kept: [(path: String, size: Int64, seed: UInt64)]) throws {
        let keep = Set(kept.map(\.path))
        for version in world.versions {
            for path in version.keys where !keep.contains(path) { try? FileManager.default.removeItem(atPath: world.fx.www + "/" + path) }
        }
    }
}
