import Foundation
import MirrorState
import Testing
import MirrorCore
import MirrorFS
import MirrorTestSupport

/// A destination that runs out of space or cannot be written, on real small filesystems: a tmpfs
/// mounted by the test (root only, as in CI) and unmounted however the test ends.
@Suite(.serialized, .enabled(if: getuid() == 0, "mounting a tmpfs needs root"))
struct DestinationTests {
    /// A mounted tmpfs, unmounted in deinit.
    final class SmallFilesystem {
        let path: String
        init(at path: String, size: String, readOnly: Bool = false) throws {
            self.path = path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            let result = try ChildProcess.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)\(readOnly ? ",ro" : "")", "tmpfs", path], timeout: 10)
            guard result.exitCode == 0 else { throw HarnessError("mount tmpfs at \(path): \(result.stderr)") }
        }
        func resize(_ size: String) throws {
            let result = try ChildProcess.run("/bin/mount", ["-o", "remount,size=\(size)", path], timeout: 10)
            guard result.exitCode == 0 else { throw HarnessError("remount \(path): \(result.stderr)") }
        }
        deinit { _ = try? ChildProcess.run("/bin/umount", ["-l", path], timeout: 10) }
    }

    /// Takes all but `leaving` bytes of the free space of the file system holding `folder`, as
    /// another writer would (`posix_fallocate` of a filler file); returns the filler's path.
    /// A download running beside it takes space between the `statvfs` and the `fallocate`: the
    /// filler then asks for what is free at that moment, again, until it gets it.
    static func fill(_ folder: String, leaving: Int64, name: String = "filler") throws -> String {
        let path = folder + "/" + name
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw HarnessError.posix("open(\(path))") }
        defer { close(fd) }
        for _ in 0..<20 {
            var vfs = statvfs()
            guard statvfs(folder, &vfs) == 0 else { throw HarnessError.posix("statvfs(\(folder))") }
            let free = Int64(vfs.f_bavail) * Int64(vfs.f_frsize)
            let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64 ?? 0
            let result = posix_fallocate(fd, 0, off_t(size + max(4096, free - leaving)))
            if result == 0 { return path }
            guard result == ENOSPC else { throw HarnessError("fallocate \(path) failed: errno \(result)") }
        }
        throw HarnessError("fallocate \(path): the free space kept shrinking")
    }

    /// Waits until a partial file under DEST/.mirror/partial holds `bytes` (or the run ended).
    static func waitForPartial(_ fx: SyncFixture, holding bytes: Int64, _ run: ChildProcess) throws {
        let partials = fx.destPath(".mirror/partial")
        try Wait.until("a partial file holds \(bytes) bytes or the run ended", timeout: 60) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: partials)) ?? []
            return names.contains { fx.size(of: partials + "/" + $0) >= bytes } || !run.isRunning
        }
    }

    /// The files fit when the run starts (the space check passes), then another writer fills the
    /// disk mid-run: exit 73, the verified file and the journal intact, the partial's durable
    /// bytes recorded, and a later run resumes from them.
    @Test func aFullDiskExits73KeepsTheJournalAndALaterRunCompletes() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "8m"))
        let small = try fx.addFile("small.bin", size: 1 << 20, seed: 1)
        let big = try fx.addFile("big.bin", size: 24 << 20, seed: 2)
        try fx.writeManifest()
        let disk = try SmallFilesystem(at: fx.dest, size: "40m")

        let run = try fx.startSync(["--jobs", "1"])
        // big.bin past its first 8 MiB checkpoint (small.bin has 1 MiB: the partial is big.bin's).
        try Self.waitForPartial(fx, holding: 9 << 20, run)
        let filler = try Self.fill(fx.dest, leaving: 1 << 20)
        let full = try run.wait(timeout: 60)
        #expect(full.exitCode == 73, "\(full)")
        #expect(full.stderr.contains("No space left on device"), "\(full.stderr)")
        #expect(full.stderr.contains("big.bin needs ") && full.stderr.contains(" free"), "the entry and the sizes: \(full.stderr)")
        #expect(!fx.exists(fx.destPath("big.bin")))
        // The journal is whole: nothing torn, every record readable.
        let fd = open(fx.destPath(".mirror"), O_RDONLY | O_DIRECTORY)
        try #require(fd >= 0)
        let journal = try Journal(folder: FileDescriptor(fd: fd, displayPath: ".mirror"), displayPath: "journal", readOnly: true)
        #expect(journal.records(for: "small.bin")?.verified != nil)
        let durable = journal.records(for: "big.bin")?.partial?.bytes ?? 0
        // Everything written before the disk filled was synced and recorded (at least the first
        // 8 MiB checkpoint; the stop itself checkpoints what was written since).
        #expect(durable >= 8 << 20 && durable < 24 << 20, "recorded \(durable) bytes of big.bin")

        try FileManager.default.removeItem(atPath: filler)
        let before = try fx.requests(atLeast: 2).count
        let rerun = try fx.sync()
        #expect(rerun.exitCode == 0, "\(rerun)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("small.bin")) == small)
        #expect(try TestData.sha256(ofFileAt: fx.destPath("big.bin")) == big)
        let resumed = try fx.requests(atLeast: before + 1).dropFirst(before)
        #expect(resumed.map(\.uri) == ["/big.bin"])
        #expect(resumed.first?.rangeHeader == "bytes=\(durable)-")
        _ = disk
    }

    /// A disk filled mid-run by another writer, then the big file unpublished: the manifest's
    /// new copy cannot be kept (the disk is full), but the run goes on with the fetched manifest,
    /// sweeps the partial no entry owns and ends ok, which frees the space (before: exit 73
    /// "cannot keep the last good copy", and the partial stayed for ever).
    @Test func aFullDiskDoesNotKeepTheRunThatFreesItFromRunning() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "8m"))
        try fx.addFile("small.bin", size: 1 << 20, seed: 1)
        try fx.addFile("big.bin", size: 24 << 20, seed: 2)
        try fx.manifest.write(to: fx.www + "/manifest.yaml")
        let disk = try SmallFilesystem(at: fx.dest, size: "40m")
        let url = fx.server.url("manifest.yaml")
        func sync() throws -> ProcessResult {
            try Mirror.run(["sync", url, "--dest", fx.dest, "--jobs", "1"], timeout: 60)
        }
        let run = try Mirror.start(["sync", url, "--dest", fx.dest, "--jobs", "1"])
        try Self.waitForPartial(fx, holding: 9 << 20, run)
        _ = try Self.fill(fx.dest, leaving: 1 << 20)
        let full = try run.wait(timeout: 60)
        #expect(full.exitCode == 73, "\(full)")
        // The block the run freed as it let the lock go (its lock file emptied) is taken too: the
        // disk stays full for the next run, as another writer would keep it.
        var vfs = statvfs()
        if statvfs(fx.dest, &vfs) == 0 && vfs.f_bavail > 0 { _ = try Self.fill(fx.dest, leaving: 0, name: "filler-2") }

        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        fx.manifest.add(path: "small.bin", size: 1 << 20, sha256: try TestData.sha256(ofFileAt: fx.www + "/small.bin"))
        let previous = try #require(FileClock.times(of: fx.www + "/manifest.yaml")).modified
        try fx.manifest.write(to: fx.www + "/manifest.yaml")
        // nginx's validators are whole seconds: another second gives the new manifest a new ETag.
        try FileClock.giveNewValidators(fx.www + "/manifest.yaml", previous: previous)
        let after = try sync()
        #expect(after.exitCode == 0, "\(after)")
        #expect(after.stderr.contains("is not kept as the last good copy"), "\(after.stderr)")
        let partials = try FileManager.default.contentsOfDirectory(atPath: fx.destPath(".mirror/partial"))
        #expect(partials.isEmpty, "the partial of the unpublished big.bin is swept: \(partials)")
        _ = disk
    }

    /// A first sync that fills the disk says what it did as any run does: the summary line under
    /// `--summary`, the bytes it received in the metrics file and `--json`, and the reason in
    /// `status` (before: no summary line, 0 bytes transferred in the metrics though megabytes came).
    @Test func aDiskThatFillsDuringAFirstSyncIsReportedWithWhatTheRunReceived() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "8m"))
        try fx.addFile("small.bin", size: 1 << 20, seed: 1)
        try fx.addFile("big.bin", size: 24 << 20, seed: 2)
        try fx.writeManifest()
        let disk = try SmallFilesystem(at: fx.dest, size: "40m")
        let metrics = fx.dir.path("mirror.prom")

        let run = try fx.startSync(["--jobs", "1", "--summary", "--metrics-file", metrics])
        try Self.waitForPartial(fx, holding: 2 << 20, run)
        _ = try Self.fill(fx.dest, leaving: 1 << 20)
        let full = try run.wait(timeout: 60)
        #expect(full.exitCode == 73, "\(full)")
        let line = full.stdout.split(separator: "\n").first.map(String.init) ?? ""
        #expect(line.hasPrefix("mirror: 1 downloaded, 1 not finished; ") && line.contains(" transferred in "),
                "the summary line: \(full.stdout)")
        let prom = try String(contentsOfFile: metrics, encoding: .utf8)
        let bytes = prom.split(separator: "\n").first { $0.hasPrefix("mirror_last_run_bytes_transferred{") }
            .flatMap { $0.split(separator: " ").last }.flatMap { Int64($0) } ?? 0
        #expect(bytes > 3 << 20, "the bytes received, small.bin and part of big.bin: \(bytes)")
        #expect(prom.contains("result=\"unwritable\"} 1"), "\(prom)")

        let status = try Mirror.run(["status", fx.manifestPath, "--dest", fx.dest], timeout: 30)
        #expect(status.stdout.contains("stopped: cannot write big.bin"), "\(status.stdout)")
        #expect(status.stdout.contains("No space left on device"), "\(status.stdout)")

        // The next run, the disk still full, stops at the space check: its --json says what it
        // found (the pending file, the exit code, the reason), and status says why.
        let again = try fx.sync(["--json"])
        #expect(again.exitCode == 73, "\(again)")
        let document = try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as? [String: Any]
        #expect(document?["exit_code"] as? Int == 73, "\(again.stdout)")
        #expect((document?["files"] as? [String: Any])?["pending"] as? Int == 1, "\(again.stdout)")
        #expect((document?["reason"] as? String)?.contains("not enough space") == true, "\(again.stdout)")
        _ = disk
    }

    /// The journal keeps free space past its end, so the records a run writes as the disk fills
    /// (partial files' durable bytes, the run's own record) still fit when no byte is free
    /// (docs/journal.md, "A full disk"). Without the reserve an append fails as soon as the
    /// journal's last block is full.
    @Test func aJournalOnAFullDiskStillTakesTheRecordsOfTheRunsEnd() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-journal-full")
        let disk = try SmallFilesystem(at: dir.path("fs"), size: "4m")
        let fd = open(disk.path, O_RDONLY | O_DIRECTORY)
        try #require(fd >= 0)
        let journal = try Journal(folder: FileDescriptor(fd: fd, displayPath: disk.path), displayPath: "journal", readOnly: false)
        _ = try Self.fill(disk.path, leaving: 0)
        var vfs = statvfs()
        #expect(statvfs(disk.path, &vfs) == 0 && vfs.f_bavail == 0, "the file system is full")
        // About 24 KiB of records: six blocks past the header's.
        for n in 0..<200 {
            try JournalWriter(journal).append(.run(RunRecord(start: 1, end: 2, result: "failed", downloaded: 0, failed: 0, bytes: Int64(n),
                                              reason: "No space left on device, record \(n)", manifest: nil)), durable: n == 199)
        }
        #expect(journal.lastRun?.bytes == 199)
        _ = disk
    }

    @Test func aReadOnlyDestinationExits73() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 1000, seed: 1)
        try fx.writeManifest()
        let disk = try SmallFilesystem(at: fx.dest, size: "1m", readOnly: true)
        let result = try fx.sync()
        #expect(result.exitCode == 73, "\(result)")
        #expect(result.stderr.contains("Read-only file system"), "\(result.stderr)")
        #expect(try fx.requestsSoFar().isEmpty)
        _ = disk
    }
}

@Suite struct LockTests {
    /// With --wait, a second run waits for the lock instead of exiting 75, then does its work.
    @Test func waitWaitsForTheLockThenSyncs() throws {
        let fx = try SyncFixture()
        let sha = try fx.addFile("a.bin", size: 1000, seed: 1)
        try fx.writeManifest()
        try FileManager.default.createDirectory(atPath: fx.destPath(".mirror"), withIntermediateDirectories: true)
        let fd = open(fx.destPath(".mirror/lock"), O_RDWR | O_CREAT, 0o644)
        try #require(fd >= 0)
        try #require(flock(fd, LOCK_EX) == 0)

        let waiting = try fx.startSync(["--wait"])
        // It tried the lock and sleeps before the next try (every 50 ms), the lock file open.
        try Wait.until("the waiting run sleeps between tries of the lock, or ended") {
            ProcessState.hasOpen(waiting.pid, endingIn: "/.mirror/lock") && ProcessState.isInTimedSleep(waiting.pid) || !waiting.isRunning
        }
        #expect(waiting.isRunning, "still waiting for the lock")
        #expect(!fx.exists(fx.destPath("a.bin")), "nothing written while another run holds the lock")
        close(fd)
        let result = try waiting.wait(timeout: 30)
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("a.bin")) == sha)
    }
}
