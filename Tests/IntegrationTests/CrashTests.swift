import Foundation
import MirrorState
import Testing
import MirrorCore
import MirrorFS
import MirrorTestSupport

/// Real SIGKILLs at random moments, with the damage a crash or a meddling person can leave, and
/// at the exact places where a crash is most dangerous. After each, a rerun must end with exactly
/// the manifest's files, verified, having resumed whatever was durably recorded.
@Suite(.serialized) struct CrashTests {
    /// SplitMix64: a seeded generator, so a failing round can be replayed with MIRROR_CRASH_SEED.
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    }

    enum Damage: CaseIterable { case none, cutJournal, garbageJournal, cutPartial, extendPartial }

    static let rounds = 30
    static let bigSize: Int64 = 32 << 20

    /// One stream, and segmented (`--segments 4` for big.bin): each segment resumes from its own
    /// durable bytes.
    @Test(arguments: [false, true])
    func randomKillsWithDamagedStateAlwaysEndCorrect(segmented: Bool) throws {
        let flags = segmented ? ["--segments", "4", "--segments-above", "1M"] : ["--segments", "1"]
        let rounds = segmented ? Self.rounds / 2 : Self.rounds
        let seed = ProcessInfo.processInfo.environment["MIRROR_CRASH_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64.max)
        var rng = Random(state: seed)
        let fx = try SyncFixture(nginx: .init(limitRate: "40m"))
        var current: [String: String] = [:]  // path → sha256 of the version the manifest lists
        var sizes: [String: Int64] = [:]
        let stable = (0..<4).map { "stable/\($0).dat" }
        let varying = ["big.bin"] + (0..<8).map { "media/clip \($0).bin" }

        func publish(round: Int) throws {
            fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
            for (index, path) in (stable + varying).enumerated() {
                if round == 0 || varying.contains(path) {
                    let size = path == "big.bin" ? Self.bigSize : Int64(1 + rng.below(300_000))
                    sizes[path] = size
                    current[path] = try TestData.writeFile(at: fx.www + "/" + path, size: size, seed: UInt64(round * 1000 + index))
                }
                fx.manifest.add(path: path, size: sizes[path] ?? 0, sha256: current[path] ?? "")
            }
            try fx.writeManifest()
        }

        try publish(round: 0)
        let first = try fx.sync(flags)
        try #require(first.exitCode == 0, "\(first)")

        var resentBeyondDurable: Int64 = 0
        var resumedRounds = 0
        var damageCounts: [Damage: Int] = [:]
        for round in 1...rounds {
            let previous = current
            try publish(round: round)
            let context = "seed \(seed), round \(round)\(segmented ? ", segmented" : "")"

            // Kill at a random moment (anywhere from before the first byte to after the end), or, every
            // other round, at a random point of big.bin's progress past its first durable checkpoint,
            // so that resuming is exercised in every run of this test, whatever the machine's load.
            let victim = try fx.startSync(flags)
            if rng.below(2) == 0 {
                // Not a wait for a state: the random moment is what this branch tests.
                usleep(useconds_t(20_000 + rng.below(1_100_000)))
            } else if segmented {
                // The segmented partial file has its full size from the start: watch the journal.
                let target = Int64(8 << 20) + Int64(rng.below(16 << 20))
                try Wait.until("\(context): the journal holds \(target) resumable bytes of big.bin or the run ended", timeout: 30) {
                    try resumableBytes(fx: fx, path: "big.bin", sha256: current["big.bin"] ?? "") >= target || !victim.isRunning
                }
            } else {
                let target = Int64(9 << 20) + Int64(rng.below(22 << 20))
                let partial = fx.destPath(".mirror/partial/" + PartialFile.name(for: "big.bin"))
                try Wait.until("\(context): big.bin's partial file holds \(target) bytes or the run ended", timeout: 30) {
                    fx.size(of: partial) >= target || !victim.isRunning
                }
            }
            victim.signal(SIGKILL)
            _ = try victim.wait(timeout: 10)

            // Whatever the moment, a manifest path holds the old verified file, the new one, or nothing.
            for path in varying {
                let target = fx.destPath(path)
                guard fx.exists(target) else { continue }
                let sha = try TestData.sha256(ofFileAt: target)
                #expect(sha == previous[path] || sha == current[path], "\(context): \(path) holds an unverified file")
            }

            let damage = Damage.allCases[rng.below(Damage.allCases.count)]
            damageCounts[damage, default: 0] += 1
            try apply(damage, fx: fx, rng: &rng)

            // What the next run may resume: durable per the (damaged) journal and still on disk.
            let resumable = try resumableBytes(fx: fx, path: "big.bin", sha256: current["big.bin"] ?? "")
            let before = try fx.requestsSoFar().count

            let rerun = try fx.sync(flags)
            #expect(rerun.exitCode == 0, "\(context): \(rerun)")
            for (path, sha) in current {
                #expect(try TestData.sha256(ofFileAt: fx.destPath(path)) == sha, "\(context): \(path)")
            }
            #expect(try treeOutsideState(fx.dest) == Set(current.keys), "\(context): stray files")

            let bigRequests = try fx.requests(atLeast: before).dropFirst(before).filter { $0.uri == "/big.bin" }
            // All of it durable (killed between the last checkpoint and the install): nothing to ask.
            if resumable > 0 && resumable < Self.bigSize {
                resumedRounds += 1
                if segmented {
                    #expect(bigRequests.allSatisfy { $0.status == 206 && $0.rangeHeader != nil }, "\(context): \(bigRequests)")
                } else {
                    #expect(bigRequests.first?.rangeHeader == "bytes=\(resumable)-", "\(context): resume from the durable \(resumable) bytes (damage: \(damage))")
                    #expect(bigRequests.first?.status == 206, "\(context)")
                }
            }
            let sent = bigRequests.reduce(0) { $0 + $1.bodyBytesSent }
            if !bigRequests.isEmpty {
                resentBeyondDurable += max(0, sent - (Self.bigSize - resumable))
            }
        }
        #expect(resentBeyondDurable == 0, "bytes sent beyond what was not yet durable: \(resentBeyondDurable)")
        #expect(resumedRounds >= rounds / 4, "only \(resumedRounds) rounds were killed with durable progress to resume (seed \(seed))")
        print("crash rounds\(segmented ? " (segmented)" : ""): \(rounds), seed \(seed), resumed: \(resumedRounds), damage: \(damageCounts)")
    }

    private func apply(_ damage: Damage, fx: SyncFixture, rng: inout Random) throws {
        let journal = fx.destPath(".mirror/journal")
        let partial = fx.destPath(".mirror/partial/" + PartialFile.name(for: "big.bin"))
        switch damage {
        case .none:
            break
        case .cutJournal:
            let size = fx.size(of: journal)
            if size > 0 { #expect(truncate(journal, off_t(rng.below(Int(size)))) == 0) }
        case .garbageJournal:
            if fx.exists(journal) {
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: journal))
                handle.seekToEndOfFile()
                handle.write(Data(TestData.bytes(count: 1 + rng.below(200), seed: rng.next())))
                handle.closeFile()
            }
        case .cutPartial:
            let size = fx.size(of: partial)
            if size > 0 { #expect(truncate(partial, off_t(rng.below(Int(size)))) == 0) }
        case .extendPartial:
            if fx.exists(partial) {
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: partial))
                handle.seekToEndOfFile()
                handle.write(Data(TestData.bytes(count: 1 + rng.below(3 << 20), seed: rng.next())))
                handle.closeFile()
            }
        }
    }

    /// Bytes of `path` a run may resume: durable per the journal (for this version of the file)
    /// and still in the partial file; per segment when segmented (0 if none).
    private func resumableBytes(fx: SyncFixture, path: String, sha256: String) throws -> Int64 {
        let fd = open(fx.destPath(".mirror"), O_RDONLY | O_DIRECTORY)
        guard fd >= 0 else { return 0 }
        let journal = try Journal(folder: FileDescriptor(fd: fd, displayPath: ".mirror"), displayPath: "journal", readOnly: true)
        guard let record = journal.records(for: path)?.partial, record.identity.digests[.sha256] == sha256 else { return 0 }
        let held = max(0, fx.size(of: fx.destPath(".mirror/partial/" + PartialFile.name(for: path))))
        guard let segments = record.segments else { return min(record.bytes, held) }
        return held == 0 ? 0 : segments.reduce(0) { $0 + max(0, min($1.done, held - $1.start)) }
    }

    /// Every file under `root`, relative, except the tool's own `.mirror` folder.
    private func treeOutsideState(_ root: String) throws -> Set<String> {
        var out: Set<String> = []
        guard let walker = FileManager.default.enumerator(atPath: root) else { return out }
        while let item = walker.nextObject() as? String {
            if item == ".mirror" { walker.skipDescendants(); continue }
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + item, isDirectory: &isDir), !isDir.boolValue {
                out.insert(item)
            }
        }
        return out
    }

    // MARK: - Named crash points

    /// A kill between a durable step and its journal record, or inside a compaction.
    @Test(arguments: ["checkpoint-before-record", "install-before-record", "compact-before-rename", "compact-after-rename"])
    func aKillAtACrashPointStillEndsCorrect(point: String) throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "64m"))
        let sha = try fx.addFile("big.bin", size: 24 << 20, seed: 42)
        let smallSHA = try fx.addFile("small.bin", size: 1000, seed: 43)
        try fx.writeManifest()

        if point.hasPrefix("compact") {
            // A journal long enough to be compacted at the start of the next run.
            try FileManager.default.createDirectory(atPath: fx.destPath(".mirror"), withIntermediateDirectories: true)
            var text = Array("mirror-journal 1\n".utf8)
            for i in 0..<500 {
                let stale = EntryIdentity(path: "old/\(i)", size: 1, digests: [.sha256: "00"])
                text += JournalRecord.failed(FailedRecord(identity: stale, error: "gone", time: 0)).encodedLine()
            }
            try Data(text).write(to: URL(fileURLWithPath: fx.destPath(".mirror/journal")))
        }

        let crashed = try Mirror.run(["sync", fx.manifestPath, "--dest", fx.dest],
                               environment: ["MIRROR_CRASH_AT": point],
                               timeout: 60)
        #expect(crashed.signal == SIGKILL, "the crash point \(point) was reached: \(crashed)")
        let before = try fx.requestsSoFar().count
        // The files the crashed run had already renamed into place (complete and verified).
        let installedAtCrash = ["big.bin", "small.bin"].filter { fx.exists(fx.destPath($0)) }

        let rerun = try fx.sync()
        #expect(rerun.exitCode == 0, "\(point): \(rerun)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("big.bin")) == sha)
        #expect(try TestData.sha256(ofFileAt: fx.destPath("small.bin")) == smallSHA)
        let journal = try String(contentsOfFile: fx.destPath(".mirror/journal"), encoding: .utf8)
        #expect(!journal.contains("old/1 "), "\(point): the stale records were compacted away")
        #expect(journal.split(separator: "\n").count < 20)

        let rerunRequests = try fx.requests(atLeast: before).dropFirst(before)
        if point == "install-before-record" {
            // The file was renamed into place but not journaled: it is hashed, not fetched again.
            #expect(!installedAtCrash.isEmpty)
            for path in installedAtCrash {
                #expect(!rerunRequests.contains { $0.uri == "/" + path }, "\(path) was fetched again")
            }
        }
        if point == "checkpoint-before-record" {
            // The first checkpoint's data was synced but not recorded: the rerun starts from zero,
            // never from unrecorded bytes.
            #expect(rerunRequests.first { $0.uri == "/big.bin" }?.rangeHeader == nil)
        }
        // A second run has nothing to do.
        let third = try fx.sync()
        #expect(third.exitCode == 0 && third.stdout.isEmpty, "\(third)")
    }

    /// A small download has no name while it downloads (PartialNaming): a SIGKILL in the middle
    /// leaves nothing in `.mirror/partial` and nothing at the path; the rerun fetches it whole.
    @Test func aKilledSmallDownloadLeavesNothingBehind() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "128k"))
        let sha = try fx.addFile("notes/small.bin", size: 512 << 10, seed: 41)
        try fx.writeManifest()
        let partialFolder = fx.destPath(".mirror/partial")

        let victim = try fx.startSync()
        // The file the run writes, seen through /proc/PID/fd: with no name it reads
        // "<partial folder>/#<inode> (deleted)".
        func partialDescriptor() -> (fd: String, target: String)? {
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(victim.pid)/fd")) ?? []
            return fds.lazy.compactMap { fd in
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(victim.pid)/fd/\(fd)")).map { ("/proc/\(victim.pid)/fd/\(fd)", $0) }
            }.first { $0.1.hasPrefix(partialFolder + "/") }
        }
        func partialBeingWritten() -> String? { partialDescriptor()?.target }
        // In the middle: the unnamed file holds 64 KiB (half a second at 128 KiB/s) of 512 KiB.
        try Wait.until("the unnamed partial file holds 64 KiB or the run ended", timeout: 30) {
            guard let open = partialDescriptor() else { return !victim.isRunning }
            var st = stat()
            return stat(open.fd, &st) == 0 && st.st_size >= 64 << 10
        }
        let open = try #require(partialBeingWritten(), "the download is under way")
        #expect(open.hasSuffix(" (deleted)"), "the download is an open file with no name: \(open)")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: partialFolder)) ?? []
        #expect(names.isEmpty, "no partial file has a name while it downloads: \(names)")
        victim.signal(SIGKILL)
        _ = try victim.wait(timeout: 30)

        #expect(((try? FileManager.default.contentsOfDirectory(atPath: partialFolder)) ?? []).isEmpty)
        #expect(!fx.exists(fx.destPath("notes/small.bin")))
        let rerun = try fx.sync()
        #expect(rerun.exitCode == 0, "\(rerun)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("notes/small.bin")) == sha)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: partialFolder)) ?? []).isEmpty)
    }
}
