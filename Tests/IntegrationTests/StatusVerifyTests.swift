import Foundation
import MirrorState
import Testing
import MirrorCore
import MirrorFS
import MirrorKit
import MirrorTestSupport

/// `mirror status` and `mirror verify`, the built binary, on destinations a real sync left behind.
@Suite(.serialized) struct StatusVerifyTests {
    static let mib: Int64 = 1 << 20

    func run(_ args: [String]) throws -> ProcessResult {
        try Mirror.run(args, timeout: 120)
    }

    func json(_ result: ProcessResult) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result)")
    }

    func entry(_ object: [String: Any], _ path: String) -> [String: Any]? {
        (object["entries"] as? [[String: Any]])?.first { $0["path"] as? String == path }
    }

    /// A sync killed in the middle of a large file leaves a partial that status reports with its
    /// percentage; status beside a running sync names it and does not disturb it.
    @Test func statusShowsAPartialAfterAKilledSyncAndARunningSync() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "2m"))
        try fx.addFile("big.bin", size: 24 * Self.mib, seed: 1)
        try fx.addFile("small.bin", size: 1000, seed: 2)
        try fx.writeManifest()
        let status = ["status", fx.manifestPath, "--dest", fx.dest]

        // Kill once the partial file is past the first durable checkpoint (every 8 MiB).
        let victim = try fx.startSync()
        let partialPath = fx.destPath(".mirror/partial/" + PartialFile.name(for: "big.bin"))
        try Wait.until("big.bin's partial file holds 9 MiB or the run ended", timeout: 60) {
            fx.size(of: partialPath) >= 9 * Self.mib || !victim.isRunning
        }
        let during = try run(status + ["--json"])
        #expect(during.exitCode == 0, "\(during)")
        let live = try json(during)
        // At 2 MiB/s the 24 MiB file takes 12 s: the sync is still running after one status.
        try #require(victim.isRunning, "the sync ended before it could be killed mid-file")
        #expect(live["sync_running"] as? Bool == true, "\(during.stdout)")
        #expect(live["sync_pid"] as? Int == Int(victim.pid), "\(during.stdout)")
        #expect(entry(live, "big.bin")?["state"] as? String == "partial", "\(during.stdout)")
        victim.signal(SIGKILL)
        _ = try victim.wait(timeout: 10)

        let after = try run(status + ["--json"])
        #expect(after.exitCode == 0, "\(after)")
        let object = try json(after)
        #expect(object["sync_running"] as? Bool == false)
        let files = try #require(object["files"] as? [String: Any])
        #expect(files["total"] as? Int == 2)
        #expect(files["partial"] as? Int == 1, "\(after.stdout)")
        let big = try #require(entry(object, "big.bin"), "\(after.stdout)")
        #expect(big["state"] as? String == "partial")
        #expect(big["size"] as? Int == Int(24 * Self.mib))
        // The durable bytes are what the journal recorded (and the file holds at least that much).
        let recorded = try recordedPartialBytes(fx: fx, path: "big.bin")
        #expect(recorded >= 8 * Self.mib)
        #expect(big["partial_bytes"] as? Int == Int(min(recorded, fx.size(of: partialPath))))
        let percent = try #require(big["percent"] as? Double)
        #expect(percent > 0 && percent < 100)
        let expectedPercent = (Double(min(recorded, fx.size(of: partialPath))) * 1000 / Double(24 * Self.mib)).rounded(.down) / 10
        #expect(percent == expectedPercent)

        let text = try run(status)
        #expect(text.exitCode == 0)
        #expect(text.stdout.contains("partial     big.bin: \(percent)% ("), "\(text.stdout)")
        #expect(!FileManager.default.fileExists(atPath: fx.destPath(".mirror/journal.tmp")))

        // A rerun, with status looking on repeatedly, finishes normally; then everything is done.
        let rerun = try fx.startSync()
        var looks = 0
        while rerun.isRunning && looks < 20 {
            let look = try run(status)
            #expect(look.exitCode == 0, "\(look)")
            looks += 1
            // Each look at another moment of the download.
            let seen = fx.size(of: partialPath)
            try Wait.until("big.bin's partial file grew past \(seen) bytes or the rerun ended", timeout: 60) {
                fx.size(of: partialPath) != seen || !rerun.isRunning
            }
        }
        let finished = try rerun.wait(timeout: 120)
        #expect(finished.exitCode == 0, "\(finished)")
        let done = try json(try run(status + ["--json"]))
        #expect((done["files"] as? [String: Any])?["done"] as? Int == 2, "\(done)")
        #expect((done["entries"] as? [Any])?.isEmpty == true)
        let lastRun = try #require(done["last_run"] as? [String: Any])
        #expect(lastRun["result"] as? String == "ok")
        #expect(lastRun["failed"] as? Int == 0)
    }

    /// A failed entry shows the last error the journal kept.
    /// Status writes its report through a buffer (docs/performance.md, "Reports that stream");
    /// a report that cannot be written is an error (exit 1), not a silent success.
    @Test func statusSaysWhenItsOutputCannotBeWritten() throws {
        let dir = try TemporaryDirectory()
        let manifest = dir.path("m.yaml")
        try ("version: 1\nbase_url: http://127.0.0.1:9/\nfiles:\n"
             + "  - path: a.bin\n    size: 3\n    sha256: \(String(repeating: "ab", count: 32))\n")
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        for extra in [[], ["--json"]] {
            let script = "exec \"$0\" status \"$1\" --dest \"$2\" \(extra.joined()) > /dev/full"
            let result = try ChildProcess.run("/bin/sh", ["-c", script, try MirrorBinary.path(), manifest, dir.path("dest")],
                                              environment: SyncFixture.loopbackOnly, timeout: 60)
            #expect(result.exitCode == 1, "\(extra): \(result)")
            #expect(result.stderr.contains("cannot write standard output: No space left on device"), "\(extra): \(result)")
        }
    }

    @Test func statusShowsTheLastErrorOfAFailedEntry() throws {
        let fx = try SyncFixture()
        try fx.addFile("good.bin", size: 5000, seed: 3)
        try fx.addFile("bad.bin", size: 5000, seed: 4, listedSHA256: String(repeating: "ab", count: 32))
        try fx.writeManifest()
        let sync = try fx.sync(["--retries", "0"])
        #expect(sync.exitCode == 1, "\(sync)")

        let result = try run(["status", fx.manifestPath, "--dest", fx.dest, "--json"])
        #expect(result.exitCode == 0)
        let object = try json(result)
        let bad = try #require(entry(object, "bad.bin"), "\(result.stdout)")
        #expect(bad["state"] as? String == "failed")
        let error = try #require(bad["error"] as? String)
        #expect(error.contains("the server's file differs from the manifest (expected sha256"), "\(error)")
        #expect(bad["failed_at"] as? String != nil)
        #expect(entry(object, "good.bin") == nil, "done entries are not listed")
        #expect((object["last_run"] as? [String: Any])?["result"] as? String == "failed")
        let text = try run(["status", fx.manifestPath, "--dest", fx.dest])
        #expect(text.stdout.contains("failed      bad.bin: " + error), "\(text.stdout)")
    }

    /// verify re-reads everything: after a sync it is happy; a flipped byte and a deleted file make
    /// it exit 1 and name both, with expected and actual values.
    @Test func verifyFindsAFlippedByteAndAMissingFile() throws {
        let fx = try SyncFixture()
        var shas: [String: String] = [:]
        for i in 0..<6 { shas["dir \(i % 2)/file \(i).bin"] = try fx.addFile("dir \(i % 2)/file \(i).bin", size: Int64(70_000 + i), seed: UInt64(i)) }
        shas["big.bin"] = try fx.addFile("big.bin", size: 6 * Self.mib, seed: 9)
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 0)
        let verify = ["verify", fx.manifestPath, "--dest", fx.dest]

        let good = try run(verify)
        #expect(good.exitCode == 0, "\(good)")
        #expect(good.stdout.hasPrefix("mirror verify: 7 good of 7; \(Formatting.bytes(6 * Self.mib + 6 * 70_000 + 15)) read in "),
                "\(good.stdout)")
        #expect(!good.stdout.contains("\r") && !good.stdout.contains("\u{1B}"), "no progress drawing on a non-terminal")
        #expect(good.stderr.isEmpty)

        let flipped = fx.destPath("big.bin")
        let fd = open(flipped, O_RDWR)
        try #require(fd >= 0)
        var byte: UInt8 = 0
        #expect(pread(fd, &byte, 1, 3_000_000) == 1)
        byte ^= 0x01
        #expect(pwrite(fd, &byte, 1, 3_000_000) == 1)
        close(fd)
        let actual = try TestData.sha256(ofFileAt: flipped)
        #expect(unlink(fx.destPath("dir 1/file 3.bin")) == 0)

        let bad = try run(verify)
        #expect(bad.exitCode == 1, "\(bad)")
        #expect(bad.stderr.contains("mirror: big.bin: checksum mismatch (expected sha256 \(shas["big.bin"] ?? ""), got \(actual))"), "\(bad.stderr)")
        #expect(bad.stderr.contains("mirror: dir 1/file 3.bin: missing"), "\(bad.stderr)")
        #expect(bad.stdout.hasPrefix("mirror verify: 5 good, 1 corrupt, 1 missing of 7;"), "\(bad.stdout)")

        let report = try run(verify + ["--json"])
        #expect(report.exitCode == 1)
        let object = try json(report)
        #expect(object["result"] as? String == "failed")
        let files = try #require(object["files"] as? [String: Any])
        #expect(files["total"] as? Int == 7)
        #expect(files["good"] as? Int == 5)
        #expect(files["corrupt"] as? Int == 1)
        #expect(files["missing"] as? Int == 1)
        let problems = try #require(object["problems"] as? [[String: Any]])
        #expect(problems.count == 2)
        let corrupt = try #require(problems.first { $0["path"] as? String == "big.bin" })
        #expect(corrupt["state"] as? String == "corrupt")
        #expect(corrupt["expected_sha256"] as? String == shas["big.bin"])
        #expect(corrupt["actual_sha256"] as? String == actual)
        #expect(corrupt["actual_size"] as? Int == Int(6 * Self.mib))
        let missing = try #require(problems.first { $0["path"] as? String == "dir 1/file 3.bin" })
        #expect(missing["state"] as? String == "missing")
        #expect(missing["actual_size"] is NSNull)

        // verify repairs nothing and writes nothing: the journal is as the sync left it.
        let journal = try TestData.sha256(ofFileAt: fx.destPath(".mirror/journal"))
        _ = try run(verify)
        #expect(try TestData.sha256(ofFileAt: fx.destPath(".mirror/journal")) == journal)
        #expect(!fx.exists(fx.destPath("dir 1/file 3.bin")))
    }

    /// Bytes of `path` the journal records as durable (0 if none).
    private func recordedPartialBytes(fx: SyncFixture, path: String) throws -> Int64 {
        let fd = open(fx.destPath(".mirror"), O_RDONLY | O_DIRECTORY)
        guard fd >= 0 else { return 0 }
        let journal = try Journal(folder: FileDescriptor(fd: fd, displayPath: ".mirror"), displayPath: "journal", readOnly: true)
        return journal.records(for: path)?.partial?.bytes ?? 0
    }
}
