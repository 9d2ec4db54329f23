import Foundation
import MirrorModel
import Testing
import MirrorCore
import MirrorTestSupport

/// `mirror sync`, the built binary, against a real nginx on loopback.
/// Serialized: the large transfers would otherwise compete for this machine's two cores.
@Suite(.serialized) struct SyncTests {
    static let mib: Int64 = 1 << 20

    /// Three transfer threads (each with its own libcurl multi handle and a share of the files)
    /// and four hashing threads: 60 small files and 3 segmented ones, all verified; a rerun is a
    /// no-op. Then a run killed with SIGKILL while all three threads transfer resumes to the
    /// same files. Each thread's requests arrive on its own connections.
    @Test func severalTransferThreadsShareTheFiles() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "4m"))
        var expected: [String: String] = [:]
        for i in 0 ..< 60 { expected["s/\(i).dat"] = try fx.addFile("s/\(i).dat", size: Int64(1000 + i * 3001), seed: UInt64(200 + i)) }
        for i in 0 ..< 3 { expected["big\(i).bin"] = try fx.addFile("big\(i).bin", size: 6 * Self.mib, seed: UInt64(300 + i)) }
        try fx.writeManifest()
        let flags = ["--transfer-threads", "3", "--jobs", "6", "--segments", "3", "--segments-above", "1M"]

        let victim = try fx.startSync(flags)
        let partial = fx.destPath(".mirror/partial")
        try Wait.until("three partial files exist", timeout: 30) {
            ((try? FileManager.default.contentsOfDirectory(atPath: partial))?.count ?? 0) >= 3
        }
        // The threads, by name (`/proc/PID/task/*/comm`): three transfer threads.
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(victim.pid)/task")) ?? []).compactMap {
            try? String(contentsOfFile: "/proc/\(victim.pid)/task/\($0)/comm", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(Set(names.filter { $0.hasPrefix("mirror-xfer-") }).count == 3, "threads: \(names)")
        // Well under way: ten of the small files verified and in place.
        try Wait.until("ten small files are in place or the run ended", timeout: 30) {
            let done = (try? FileManager.default.contentsOfDirectory(atPath: fx.destPath("s"))) ?? []
            return done.filter { $0.hasSuffix(".dat") }.count >= 10 || !victim.isRunning
        }
        victim.signal(SIGKILL)
        _ = try victim.wait(timeout: 30)

        let run = try fx.sync(flags)
        #expect(run.exitCode == 0, "\(run)")
        for (path, sha) in expected { #expect(try TestData.sha256(ofFileAt: fx.destPath(path)) == sha, "\(path)") }
        let connections = Set(try fx.requests(atLeast: 63).map(\.connection))
        #expect(connections.count >= 3, "\(connections.count) connections")
        let before = try fx.requestsSoFar().count
        let again = try fx.sync(flags)
        #expect(again.exitCode == 0 && again.stdout.isEmpty, "\(again)")
        #expect(try fx.requestsSoFar().count == before, "the rerun sent requests")
    }

    /// 1 GiB and 200 small files: all verified, peak memory bounded; then a rerun that sends no
    /// request and prints nothing (cron mails only when there is news).
    @Test func syncsALargeFileAndManySmallOnesThenDoesNothing() throws {
        let fx = try SyncFixture()
        var expected: [String: String] = [:]
        expected["disk/image.iso"] = try fx.addFile("disk/image.iso", size: 1024 * Self.mib, seed: 1)
        for i in 0..<200 {
            let path = "small/\(i / 50)/file \(i).dat"
            expected[path] = try fx.addFile(path, size: Int64(1 + (i * 7919) % 65_536), seed: UInt64(100 + i))
        }
        try fx.writeManifest()

        // Peak memory through GNU time: a child spawned from the (large) test runner inherits the
        // runner's high-water RSS in its own ru_maxrss at exec, so time's child is measured instead.
        let rssFile = fx.dir.path("rss")
        let first = try ChildProcess.run("/usr/bin/time", ["-f", "%M", "-o", rssFile, try MirrorBinary.path(),
                                                           "sync", fx.manifestPath, "--dest", fx.dest],
                                         environment: SyncFixture.loopbackOnly, timeout: 300)
        #expect(first.exitCode == 0, "\(first)")
        let peakKiB = Int(try String(contentsOfFile: rssFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        for (path, sha) in expected {
            #expect(try TestData.sha256(ofFileAt: fx.destPath(path)) == sha, "\(path)")
        }
        #expect(first.stdout.contains("downloaded disk/image.iso (1.0 GiB)"))
        // 40 MB = 39,062 KiB (GNU time's %M is in KiB).
        #expect(peakKiB > 0 && peakKiB <= 39_062, "peak RSS \(peakKiB) KiB while syncing 1 GiB")
        print("measured: 1 GiB + 200 files synced in \(first.wallSeconds) s, peak RSS \(peakKiB) KiB")
        // The 1 GiB file came in segments (the default above 64 MiB): 32 ranges of 32 MiB (four
        // per connection of the default 8), each asked for once, each answered with exactly that range.
        #expect(SegmentPolicy.segmentLength(size: 1024 * Self.mib, connections: ConnectionPolicy.defaultSegments) == 32 * Self.mib)
        let requestsAfterFirst = try fx.requests(atLeast: 232).count
        #expect(requestsAfterFirst == 232)
        let segments = try fx.requestsSoFar().filter { $0.uri == "/disk/image.iso" }
        let piece = 32 * Self.mib
        #expect(segments.allSatisfy { $0.status == 206 } && segments.count == 32)
        #expect(Set(segments.compactMap(\.rangeHeader)) == Set((0..<32).map { "bytes=\(Int64($0) * piece)-\(Int64($0 + 1) * piece - 1)" }))

        let second = try fx.sync()
        #expect(second.exitCode == 0, "\(second)")
        #expect(second.stdout.isEmpty, "a no-op run is silent when not on a terminal: \(second.stdout)")
        print("measured: no-op rerun \(second.wallSeconds) s, \(second.stdout.utf8.count) bytes of output")
        #expect(second.stderr.isEmpty, "\(second.stderr)")
        #expect(try fx.requestsSoFar().count == requestsAfterFirst, "a no-op run sends no request")
        #expect(!FileManager.default.fileExists(atPath: fx.destPath(".mirror/partial/") + PartialFile.name(for: "disk/image.iso")))
    }

    /// A first sync of many files lets each file's state go once it is installed: peak memory grows
    /// by about 0.34 KiB a file (the manifest's entry and its journal record), where every task and
    /// partial file used to be held to the end (2.8 KiB a file). Measured as the growth from 3,000
    /// to 24,000 files (debug build), so the fixed part does not count.
    @Test func aFirstSyncOfManyFilesHoldsLittlePerFile() throws {
        func peakKiB(files count: Int) throws -> Int {
            let fx = try SyncFixture()
            for i in 0 ..< count {
                let path = "d\(i / 1000)/f\(i)"
                let bytes = Array("file \(i)\n".utf8)
                try FileManager.default.createDirectory(atPath: fx.www + "/d\(i / 1000)", withIntermediateDirectories: true)
                guard FileManager.default.createFile(atPath: fx.www + "/" + path, contents: Data(bytes)) else { throw HarnessError("cannot write \(path)") }
                fx.manifest.add(path: path, size: Int64(bytes.count), sha256: TestData.sha256(of: bytes))
            }
            try fx.writeManifest()
            let rssFile = fx.dir.path("rss")
            let run = try ChildProcess.run("/usr/bin/time", ["-f", "%M", "-o", rssFile, try MirrorBinary.path(),
                                                             "sync", fx.manifestPath, "--dest", fx.dest, "--quiet"],
                                           environment: SyncFixture.loopbackOnly, timeout: 300)
            #expect(run.exitCode == 0, "\(run)")
            #expect(try TestData.sha256(ofFileAt: fx.destPath("d\((count - 1) / 1000)/f\(count - 1)")) == TestData.sha256(of: Array("file \(count - 1)\n".utf8)))
            return Int(try String(contentsOfFile: rssFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        let few = try peakKiB(files: 3000), many = try peakKiB(files: 24_000)
        let perFile = Double(many - few) / 21_000
        print("measured: first sync peak RSS \(few) KiB for 3,000 files, \(many) KiB for 24,000: \(perFile) KiB a file")
        // 0.62 KiB a file while same-run duplicates were found through a dictionary of entries
        // and the journal's index grew by doubling; 0.2-0.4 since (docs/performance.md).
        #expect(few > 0 && perFile < 0.5, "\(perFile) KiB a file")
    }

    /// SIGKILL halfway through a rate-limited 256 MiB download; the rerun resumes with a range
    /// request, and the server sends at most 16 MiB more than the file over both runs.
    @Test func aKilledSyncResumesWhereItStopped() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "48m"))
        let sha = try fx.addFile("video.mp4", size: 256 * Self.mib, seed: 7)
        try fx.writeManifest()
        let partial = fx.destPath(".mirror/partial/" + PartialFile.name(for: "video.mp4"))

        // One stream (segmented downloads have their own tests in SegmentTests).
        let victim = try fx.startSync(["--segments", "1"])
        try Wait.until("video.mp4's partial file holds 128 MiB or the run ended", timeout: 60) {
            fx.size(of: partial) >= 128 * Self.mib || !victim.isRunning
        }
        #expect(fx.size(of: partial) >= 128 * Self.mib, "the download never got halfway")
        let killedAt = fx.size(of: partial)
        victim.signal(SIGKILL)
        let killed = try victim.wait(timeout: 10)
        #expect(killed.signal == SIGKILL)
        #expect(!fx.exists(fx.destPath("video.mp4")), "nothing at the path before it is verified")

        let rerun = try fx.sync(["--segments", "1"])
        #expect(rerun.exitCode == 0, "\(rerun)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("video.mp4")) == sha)
        let gets = try fx.requests(atLeast: 2).filter { $0.uri == "/video.mp4" }
        #expect(gets.count == 2)
        #expect(gets.last?.status == 206)
        #expect(gets.last?.rangeHeader?.hasPrefix("bytes=") == true)
        #expect(gets.last?.ifRange != nil, "the resume carries the validator")
        let sent = gets.reduce(0) { $0 + $1.bodyBytesSent }
        #expect(sent <= 272 * Self.mib, "server sent \(sent) bytes for a 256 MiB file over two runs")
        print("measured: killed at \(killedAt) bytes; server sent \(sent) bytes over both runs (file \(256 * Self.mib))")
    }

    /// A server that ignores Range (nginx `max_ranges 0`) answers 200 to the resume: the tool takes
    /// that response whole, from byte 0 (the journal forgets the old bytes and the file is cut
    /// first, on the sync thread), asks for nothing more and ends verified.
    @Test func aServerIgnoringRangesStillEndsVerified() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "32m", maxRanges: 0))
        let sha = try fx.addFile("data.bin", size: 64 * Self.mib, seed: 3)
        try fx.writeManifest()
        let partial = fx.destPath(".mirror/partial/" + PartialFile.name(for: "data.bin"))
        let victim = try fx.startSync(["--segments", "1"])
        try Wait.until("data.bin's partial file holds 20 MiB or the run ended", timeout: 60) {
            fx.size(of: partial) >= 20 * Self.mib || !victim.isRunning
        }
        victim.signal(SIGKILL)
        _ = try victim.wait(timeout: 10)

        let rerun = try fx.sync(["--segments", "1"])
        #expect(rerun.exitCode == 0, "\(rerun)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("data.bin")) == sha)
        let requests = try fx.requests(atLeast: 2)
        let resume = try #require(requests.last)
        #expect(requests.count == 2, "the file was asked for again: \(requests)")
        #expect(resume.rangeHeader != nil && resume.status == 200 && resume.bodyBytesSent == 64 * Self.mib,
                "the resume asked for a range and got the whole file, all of it used: \(requests)")
    }

    /// A wrong checksum in the manifest: exit 1, a message naming the path and both checksums, and
    /// nothing at the path.
    @Test func aWrongChecksumFailsTheEntryAndLeavesNothing() throws {
        let fx = try SyncFixture()
        let wrong = String(repeating: "0", count: 64)
        let actual = try fx.addFile("bad.bin", size: 100_000, seed: 9, listedSHA256: wrong)
        let goodSHA = try fx.addFile("good.bin", size: 5000, seed: 10)
        try fx.writeManifest()

        let result = try fx.sync()
        #expect(result.exitCode == 1, "\(result)")
        #expect(result.stderr.contains("bad.bin"))
        #expect(result.stderr.contains(wrong))
        #expect(result.stderr.contains(actual))
        #expect(result.stderr.contains("the server's file differs from the manifest"))
        #expect(result.stderr.contains("the same twice from \(fx.server.url("bad.bin"))); republish the manifest or the file"), "\(result.stderr)")
        #expect(!fx.exists(fx.destPath("bad.bin")))
        #expect(try TestData.sha256(ofFileAt: fx.destPath("good.bin")) == goodSHA, "the good entry is done and saved")
        #expect(try fx.requests(atLeast: 3).filter { $0.uri == "/bad.bin" }.count == 2, "the same wrong bytes twice end the retries")
    }

    /// Entries with sha512 (alone, or beside sha256) are verified against every digest listed.
    @Test func sha512IsVerifiedAloneAndBesideSHA256() throws {
        let fx = try SyncFixture()
        let bytes = TestData.bytes(count: 300_000, seed: 21)
        try Data(bytes).write(to: URL(fileURLWithPath: fx.www + "/a.bin"))
        try Data(bytes).write(to: URL(fileURLWithPath: fx.www + "/b.bin"))
        try Data(bytes).write(to: URL(fileURLWithPath: fx.www + "/c.bin"))
        let sha512 = Hasher.digest(.sha512, of: bytes).hex
        let wrong512 = String(repeating: "0", count: 128)
        fx.manifest.add(path: "a.bin", size: 300_000, sha256: TestData.sha256(of: bytes), extra: ["sha512": sha512])
        var text = fx.manifest.yaml
        text += "  - path: b.bin\n    size: 300000\n    sha512: \(sha512)\n"
        text += "  - path: c.bin\n    size: 300000\n    sha256: \(TestData.sha256(of: bytes))\n    sha512: \(wrong512)\n"
        try Data(text.utf8).write(to: URL(fileURLWithPath: fx.manifestPath))

        let result = try fx.sync()
        #expect(result.exitCode == 1, "\(result)")
        #expect(fx.exists(fx.destPath("a.bin")))
        #expect(fx.exists(fx.destPath("b.bin")))
        #expect(!fx.exists(fx.destPath("c.bin")), "a right sha256 does not excuse a wrong sha512")
        #expect(result.stderr.contains("c.bin: the server's file differs from the manifest (expected sha512 \(wrong512), got \(sha512), the same twice"), "\(result.stderr)")
    }

    /// An older file at the path stays untouched when the new one cannot be verified, and a wrong
    /// local file is replaced only by a verified copy.
    @Test func localFilesAreReplacedOnlyByVerifiedCopies() throws {
        let fx = try SyncFixture()
        let sha = try fx.addFile("keep.bin", size: 50_000, seed: 11)
        try fx.addFile("broken.bin", size: 50_000, seed: 12, listedSHA256: String(repeating: "f", count: 64))
        try fx.writeManifest()
        try FileManager.default.createDirectory(atPath: fx.dest, withIntermediateDirectories: true)
        let old = TestData.bytes(count: 50_000, seed: 99)
        try Data(old).write(to: URL(fileURLWithPath: fx.destPath("keep.bin")))
        try Data(old).write(to: URL(fileURLWithPath: fx.destPath("broken.bin")))

        let result = try fx.sync()
        #expect(result.exitCode == 1)
        #expect(result.stdout.contains("replaced keep.bin"))
        #expect(try TestData.sha256(ofFileAt: fx.destPath("keep.bin")) == sha)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: fx.destPath("broken.bin")))) == old,
                "the older file stays when the new copy does not verify")
    }

    /// Invalid manifests: exit 65 with FILE:LINE:COL, no request sent, nothing created.
    @Test(arguments: [
        ("version: 1\nfiles: [\n", "syntax"),
        ("version: 1\nbase_url: http://h/\nfiles:\n  - path: a\n    size: 1\n    sha265: 00\n", "sha265"),
        ("version: 1\nbase_url: http://h/\nfiles:\n  - path: ../etc/passwd\n    size: 1\n    sha256: \(String(repeating: "a", count: 64))\n", ".."),
        ("version: 1\nbase_url: http://h/\nfiles:\n  - path: a\n    size: 1\n    sha256: \(String(repeating: "a", count: 64))\n  - path: a\n    size: 1\n    sha256: \(String(repeating: "a", count: 64))\n", "duplicate"),
        ("version: 1\nbase_url: http://h/\nfiles:\n  - path: a\n    size: 1\n    sha256: xyz\n", "sha256"),
        ("version: 1\nbase_url: http://h/\nfiles:\n  - path: a\n    size: -1\n    sha256: \(String(repeating: "a", count: 64))\n", "size"),
        ("version: 2\nfiles: []\n", "version"),
    ])
    func invalidManifestsChangeNothing(text: String, mentions: String) throws {
        let fx = try SyncFixture()
        try fx.addFile("a", size: 1, seed: 1)
        // Point the base URL at the real server so a request, were one sent, would be logged.
        let body = text.replacingOccurrences(of: "http://h/", with: fx.server.baseURL)
        try Data(body.utf8).write(to: URL(fileURLWithPath: fx.manifestPath))

        let result = try fx.sync()
        #expect(result.exitCode == 65, "\(result)")
        let pattern = try Regex(#"manifest\.yaml:\d+:\d+: "#)
        #expect(result.stderr.contains(pattern), "\(result.stderr)")
        #expect(result.stderr.lowercased().contains(mentions.lowercased()), "\(result.stderr)")
        #expect(try fx.requestsSoFar().isEmpty)
        #expect(!fx.exists(fx.dest), "nothing created")
    }

    /// A path that cannot be inspected (here a symlink loop as a folder) blocks that entry, in the
    /// dry run as in the real run; the other entries go ahead.
    @Test func anUninspectablePathBlocksOnlyItsEntry() throws {
        let fx = try SyncFixture()
        try fx.addFile("loop/a.bin", size: 100, seed: 1)
        let sha = try fx.addFile("fine.bin", size: 100, seed: 2)
        try fx.writeManifest()
        try FileManager.default.createDirectory(atPath: fx.dest, withIntermediateDirectories: true)
        #expect(symlink("loop", fx.destPath("loop")) == 0)

        let dry = try fx.sync(["--dry-run"])
        #expect(dry.exitCode == 0, "\(dry)")
        #expect(dry.stdout.contains("blocked loop/a.bin"), "\(dry.stdout)")
        #expect(dry.stdout.contains("download fine.bin"))

        let real = try fx.sync()
        #expect(real.exitCode == 1, "\(real)")
        #expect(real.stderr.contains("loop/a.bin: "), "\(real.stderr)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("fine.bin")) == sha)
    }

    @Test func dryRunPrintsThePlanAndTouchesNothing() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 1000, seed: 1)
        try fx.addFile("b/c.bin", size: 2000, seed: 2)
        try fx.writeManifest()
        let result = try fx.sync(["--dry-run"])
        #expect(result.exitCode == 0, "\(result)")
        #expect(result.stdout.contains("download a.bin"))
        #expect(result.stdout.contains("download b/c.bin"))
        #expect(!fx.exists(fx.dest))
        #expect(try fx.requestsSoFar().isEmpty)
    }

    /// Another run holds the lock: exit 75 at once, nothing fetched.
    @Test func aSecondRunOnTheSameDestinationExits75() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 1000, seed: 1)
        try fx.writeManifest()
        try FileManager.default.createDirectory(atPath: fx.destPath(".mirror"), withIntermediateDirectories: true)
        let fd = open(fx.destPath(".mirror/lock"), O_RDWR | O_CREAT, 0o644)
        try #require(fd >= 0)
        defer { close(fd) }
        try #require(flock(fd, LOCK_EX) == 0)

        let result = try fx.sync(timeout: 30)
        #expect(result.exitCode == 75, "\(result)")
        #expect(result.stderr.contains("another mirror run"))
        #expect(try fx.requestsSoFar().isEmpty)
        #expect(!fx.exists(fx.destPath("a.bin")))
    }

    /// With `.mirror` deleted, the next run re-hashes what is there instead of downloading it.
    @Test func losingTheJournalCostsAHashNotADownload() throws {
        let fx = try SyncFixture()
        let sha = try fx.addFile("a.bin", size: 3 * Self.mib, seed: 1)
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 0)
        try FileManager.default.removeItem(atPath: fx.destPath(".mirror"))
        let before = try fx.requests(atLeast: 1).count

        let rerun = try fx.sync()
        #expect(rerun.exitCode == 0, "\(rerun)")
        #expect(rerun.stdout.isEmpty)
        #expect(try fx.requestsSoFar().count == before)
        #expect(try TestData.sha256(ofFileAt: fx.destPath("a.bin")) == sha)
        #expect(fx.exists(fx.destPath(".mirror/journal")))
    }

    @Test func aMissingFileFailsWithTheStatusAndWithoutRetries() throws {
        let fx = try SyncFixture()
        fx.manifest.add(path: "gone.bin", size: 10, sha256: String(repeating: "a", count: 64))
        try fx.addFile("here.bin", size: 10, seed: 1)
        try fx.writeManifest()
        let result = try fx.sync()
        #expect(result.exitCode == 1, "\(result)")
        #expect(result.stderr.contains("gone.bin: server answered HTTP 404"), "\(result.stderr)")
        #expect(try fx.requests(atLeast: 2).filter { $0.uri == "/gone.bin" }.count == 1, "a 404 is not retried")
        #expect(!fx.exists(fx.destPath("gone.bin")))
        #expect(fx.exists(fx.destPath("here.bin")))
    }

    /// Nothing listens at the source: exit 75 (try again later), quickly, and no retry storm.
    @Test func anUnreachableSourceExits75() throws {
        let fx = try SyncFixture()
        let closedPort = try Loopback.freePort()
        var manifest = ManifestBuilder(baseURL: "http://127.0.0.1:\(closedPort)/")
        for i in 0..<20 { manifest.add(path: "f\(i)", size: 10, sha256: String(repeating: "a", count: 64)) }
        try manifest.write(to: fx.manifestPath)
        let result = try fx.sync(timeout: 60)
        #expect(result.exitCode == 75, "\(result)")
        #expect(result.stderr.contains("cannot reach the server"))
        #expect(result.wallSeconds < 20, "gave up on a dead host after \(result.wallSeconds) s: no retry storm")
    }
}

/// Stopping and refusing: the exits that tell cron "try again later" or "fix the destination".
@Suite(.serialized) struct StopTests {
    /// A destination that cannot be created (a file is in the way): exit 73, no request.
    @Test func anUncreatableDestinationExits73() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 10, seed: 1)
        try fx.writeManifest()
        try Data("not a folder".utf8).write(to: URL(fileURLWithPath: fx.dir.path("blocker")))
        let result = try Mirror.run(
                              ["sync", fx.manifestPath, "--dest", fx.dir.path("blocker/media")], timeout: 30)
        #expect(result.exitCode == 73, "\(result)")
        #expect(result.stderr.contains("blocker"), "the message names the path: \(result.stderr)")
        #expect(try fx.requestsSoFar().isEmpty)
    }

    /// SIGTERM mid-transfer: the run saves its progress and exits 75; the next run resumes.
    @Test(arguments: [SIGTERM, SIGINT])
    func aSignalStopsCleanlyAndTheNextRunResumes(signal: Int32) throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "16m"))
        let sha = try fx.addFile("slow.bin", size: 64 << 20, seed: 5)
        try fx.writeManifest()
        let partial = fx.destPath(".mirror/partial/" + PartialFile.name(for: "slow.bin"))
        let run = try fx.startSync(["--segments", "1"])
        try Wait.until("slow.bin's partial file holds 20 MiB or the run ended", timeout: 30) {
            fx.size(of: partial) >= 20 << 20 || !run.isRunning
        }
        run.signal(signal)
        let stopped = try run.wait(timeout: 10)
        #expect(stopped.exitCode == 75, "\(stopped)")
        #expect(stopped.stdout.contains("a rerun continues"), "\(stopped.stdout)")
        let journal = try String(contentsOfFile: fx.destPath(".mirror/journal"), encoding: .utf8)
        let heldAtStop = fx.size(of: partial)
        #expect(journal.contains("bytes=\(heldAtStop)"), "the stop checkpointed every byte held (\(heldAtStop))")

        let rerun = try fx.sync(["--segments", "1"])
        #expect(rerun.exitCode == 0, "\(rerun)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("slow.bin")) == sha)
        let gets = try fx.requests(atLeast: 2)
        #expect(gets.last?.rangeHeader == "bytes=\(heldAtStop)-")
    }

    /// `--deadline 5s` on a slow transfer: exit 75 within the deadline plus 2 s, state saved, and
    /// the next run continues from there.
    @Test func aDeadlineStopsTheRunWithStateSavedAndTheRerunContinues() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "4m"))
        let sha = try fx.addFile("slow.bin", size: 40 << 20, seed: 6)
        try fx.writeManifest()
        let result = try fx.sync(["--deadline", "5s"], timeout: 30)
        #expect(result.exitCode == 75, "\(result)")
        #expect(result.wallSeconds < 9, "stopped \(result.wallSeconds) s after start with a 5 s deadline")
        #expect(result.stdout.contains("deadline passed"))
        #expect(!fx.exists(fx.destPath("slow.bin")))
        let held = fx.size(of: fx.destPath(".mirror/partial/" + PartialFile.name(for: "slow.bin")))
        #expect(held > 8 << 20)

        let rerun = try fx.sync()
        #expect(rerun.exitCode == 0, "\(rerun)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("slow.bin")) == sha)
        #expect(try fx.requests(atLeast: 2).last?.rangeHeader == "bytes=\(held)-")
    }
}
