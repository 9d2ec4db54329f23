import Foundation
import MirrorModel
import Testing
import MirrorCore
import MirrorTestSupport

/// Chunk deltas (docs/cli.md, "Chunk deltas"), against nginx: the publisher runs
/// `mirror manifest create --chunks`, and a machine holding an older version of a large file
/// fetches only the chunks it lacks, resumes a delta killed half-way, and never installs a wrong file.
@Suite(.serialized) struct DeltaTests {
    static let imageSize = 256 << 20

    /// Writes the image's second version to `v2`: 16 scattered 4 KiB edits, 1 MiB inserted
    /// mid-file, and its last MiB cut. Streamed in 1 MiB blocks, so the test process stays small
    /// (other tests measure children's peak RSS, which counts ours). Returns its SHA-256.
    static func writeEdited(from v1: String, to v2: String, seed: UInt64) throws -> String {
        let size = imageSize
        var random = SeededRandom(seed: seed)
        let stride = size / 16
        let edits: [(at: Int, patch: [UInt8])] = (0 ..< 16).map { i in
            (random.below(stride - 4096) + i * stride, TestData.bytes(count: 4096, seed: seed &+ UInt64(i) &+ 1))
        }
        guard let input = FileHandle(forReadingAtPath: v1) else { throw HarnessError("cannot read \(v1)") }
        defer { input.closeFile() }
        guard FileManager.default.createFile(atPath: v2, contents: nil) else { throw HarnessError("cannot create \(v2)") }
        guard let output = FileHandle(forWritingAtPath: v2) else { throw HarnessError("cannot write \(v2)") }
        defer { output.closeFile() }
        let hasher = Hasher(.sha256)
        func emit(_ bytes: [UInt8]) {
            hasher.update(bytes)
            output.write(Data(bytes))
        }
        let block = 1 << 20
        var offset = 0
        while offset < size - block {   // the last MiB is cut
            if offset == size / 2 { emit(TestData.bytes(count: block, seed: seed &+ 100)) }
            var bytes = [UInt8](input.readData(ofLength: block))
            for edit in edits where edit.at < offset + bytes.count && edit.at + 4096 > offset {
                let from = max(edit.at, offset), to = min(edit.at + 4096, offset + bytes.count)
                bytes.replaceSubrange(from - offset ..< to - offset, with: edit.patch[(from - edit.at) ..< (to - edit.at)])
            }
            emit(bytes)
            offset += block
        }
        return hasher.finalize().hex
    }

    /// Publishes `www` with chunk indexes, as a publisher would.
    static func publish(_ fx: SyncFixture, _ extra: [String] = []) throws {
        let run = try Mirror.run(
                           ["manifest", "create", fx.www, "--base-url", fx.server.baseURL, "--chunks",
                            "-o", fx.manifestPath] + extra, timeout: 120)
        #expect(run.exitCode == 0, "\(run)")
    }

    static func bytesSent(_ requests: [AccessLogEntry]) -> Int64 { requests.reduce(0) { $0 + $1.bodyBytesSent } }

    /// A changed image costs only its changed chunks, across a kill: DEST holds v1 of a 256 MiB
    /// image; v2 is synced with a SIGKILL in the middle of the delta, then resumed. In all, the
    /// server sends at most 4 % of the file, index included; the resumed run continues from the
    /// journal (it asks for no index again); the result verifies.
    @Test func aChangedImageCostsOnlyItsChangedChunksAcrossAKill() throws {
        let fx = try SyncFixture()
        let image = fx.www + "/images/lab.img"
        try TestData.writeFile(at: image, size: Int64(Self.imageSize), seed: 41)
        try Self.publish(fx)
        let first = try fx.sync()
        #expect(first.exitCode == 0, "\(first)")
        let v1Requests = try fx.requests(atLeast: 1).count

        let v2SHA = try Self.writeEdited(from: image, to: image + ".v2", seed: 42)
        try FileManager.default.removeItem(atPath: image)
        try FileManager.default.moveItem(atPath: image + ".v2", toPath: image)
        try Self.publish(fx)
        let manifest = try String(contentsOfFile: fx.manifestPath, encoding: .utf8)
        #expect(manifest.contains("path: \".mirror-chunks/images/lab.img\""), "\(manifest)")

        // Killed once the journal holds v2's layout and at least two fetched ranges after it.
        func segmentRecords() -> Int {
            let journal = (try? String(contentsOfFile: fx.destPath(".mirror/journal"), encoding: .utf8)) ?? ""
            return journal.split(separator: "\n").filter { $0.contains(" partial path=images/lab.img ") && $0.contains(" segs=")
                && $0.contains(" sha256=\(v2SHA) ") }.count
        }
        // Slowly, so that the kill lands while ranges are still being fetched.
        let victim = try fx.startSync(["--limit-rate", "512k"])

        var records = 0
        try Wait.until("the journal holds three records of v2's segments or the run ended", timeout: 60) {
            records = segmentRecords()
            return records >= 3 || !victim.isRunning
        }
        let ranges = try fx.server.waitForAccessLog(count: 0, timeout: 0).dropFirst(v1Requests)
            .filter { $0.uri.hasSuffix("lab.img") && $0.status == 206 }.count
        victim.signal(SIGKILL)
        let killed = try victim.wait(timeout: 30)
        #expect(killed.signal == SIGKILL, "the delta ended before the kill: \(killed)")
        #expect(records >= 3 && ranges >= 2, "killed after \(records) journal records and \(ranges) ranges")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("images/lab.img")) != v2SHA, "the kill came too late")
        let beforeResume = try fx.requestsSoFar().count

        let resumed = try fx.sync(["--json"])
        #expect(resumed.exitCode == 0, "\(resumed)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("images/lab.img")) == v2SHA)
        let all = try fx.requests(atLeast: beforeResume + 1)
        let resumeRequests = Array(all.dropFirst(beforeResume))
        #expect(!resumeRequests.contains { $0.uri.contains(".mirror-chunks") }, "the resumed run planned the delta again: \(resumeRequests)")
        #expect(resumeRequests.allSatisfy { $0.status == 206 }, "the resumed run downloaded whole: \(resumeRequests)")
        #expect(resumeRequests.count < all.count - beforeResume + 1 && resumeRequests.count <= ranges + 20,
                "the resumed run asked for \(resumeRequests.count) ranges")
        let sent = Self.bytesSent(Array(all.dropFirst(v1Requests)))
        let limit = Int64(Self.imageSize) * 4 / 100
        #expect(sent <= limit, "the server sent \(sent) bytes for the delta, more than 4 % (\(limit))")
        print("delta: \(sent) bytes from the server (\(String(format: "%.2f", Double(sent) * 100 / Double(Self.imageSize))) % of \(Self.imageSize)) in \(all.count - v1Requests) requests")
        let verify = try Mirror.run(["verify", fx.manifestPath, "--dest", fx.dest], timeout: 120)
        #expect(verify.exitCode == 0, "\(verify)")
    }

    /// The server's copy of v2 is damaged in a chunk the delta must fetch: the delta's result
    /// fails its digest, the file is fetched again whole, is still wrong, and the entry fails
    /// (exit 1) with v1 untouched at its path. Once the server is mended, the next run installs v2.
    @Test func aCorruptChunkOnTheServerIsNeverInstalled() throws {
        let fx = try SyncFixture()
        let image = fx.www + "/disk.img"
        let v1SHA = try TestData.writeFile(at: image, size: 32 << 20, seed: 51)
        try Self.publish(fx, ["--chunks-above", "1M"])
        #expect(try fx.sync().exitCode == 0)

        var v2 = [UInt8](try Data(contentsOf: URL(fileURLWithPath: image)))
        v2.insert(contentsOf: TestData.bytes(count: 512 << 10, seed: 52), at: 10 << 20)
        try Data(v2).write(to: URL(fileURLWithPath: image))
        let v2SHA = TestData.sha256(of: v2)
        try Self.publish(fx, ["--chunks-above", "1M"])
        // Damage the server's copy inside the inserted part, after the manifest was made.
        v2[(10 << 20) + 1000] ^= 0xff
        try Data(v2).write(to: URL(fileURLWithPath: image))
        let before = try fx.requestsSoFar().count

        let bad = try fx.sync()
        #expect(bad.exitCode == 1, "\(bad)")
        #expect(bad.stderr.contains("disk.img"), "\(bad.stderr)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("disk.img")) == v1SHA, "a wrong file was installed")
        let requests = Array(try fx.requests(atLeast: before + 2).dropFirst(before))
        #expect(bad.stderr.contains("not the chunk index's; fetching them again"), "\(bad.stderr)")
        #expect(requests.contains { $0.uri.hasSuffix("disk.img") && $0.status == 200 }, "no whole download after the bad delta: \(requests)")

        v2[(10 << 20) + 1000] ^= 0xff
        try Data(v2).write(to: URL(fileURLWithPath: image))
        let good = try fx.sync()
        #expect(good.exitCode == 0, "\(good)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("disk.img")) == v2SHA)
    }

    /// An index that is missing (404) or not what the manifest says costs only the delta: the
    /// file is downloaded whole, with a warning, and verifies.
    @Test func aMissingOrWrongIndexFallsBackToAWholeDownload() throws {
        let fx = try SyncFixture()
        let image = fx.www + "/a.img"
        try TestData.writeFile(at: image, size: 8 << 20, seed: 61)
        try Self.publish(fx, ["--chunks-above", "1M"])
        #expect(try fx.sync().exitCode == 0)

        for damage in ["missing", "tampered"] {
            let sha = try TestData.writeFile(at: image, size: 8 << 20, seed: damage == "missing" ? 62 : 63)
            try Self.publish(fx, ["--chunks-above", "1M"])
            let index = fx.www + "/.mirror-chunks/a.img"
            if damage == "missing" {
                try FileManager.default.removeItem(atPath: index)
            } else {
                var bytes = try Data(contentsOf: URL(fileURLWithPath: index))
                bytes.append(0)
                try bytes.write(to: URL(fileURLWithPath: index))
            }
            let run = try fx.sync()
            #expect(run.exitCode == 0, "\(damage): \(run)")
            #expect(run.stderr.contains("no delta"), "\(damage): \(run.stderr)")
            #expect(try TestData.sha256(ofFileAt: fx.destPath("a.img")) == sha, "\(damage)")
        }
    }

    /// A `--seed` folder holding an older version at the same path serves as the delta's base
    /// for an empty DEST; `manifest create` never lists its own indexes, and a rerun in place
    /// writes the same manifest.
    @Test func aSeedHoldingAnOlderVersionIsTheDeltasBase() throws {
        let fx = try SyncFixture()
        let image = fx.www + "/set/b.img"
        try TestData.writeFile(at: image, size: 16 << 20, seed: 71)
        let seed = fx.dir.path("usb")
        try FileManager.default.createDirectory(atPath: seed + "/set", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: image, toPath: seed + "/set/b.img")
        var v2 = [UInt8](try Data(contentsOf: URL(fileURLWithPath: image)))
        v2.replaceSubrange(5000 ..< 9096, with: TestData.bytes(count: 4096, seed: 72))
        try Data(v2).write(to: URL(fileURLWithPath: image))
        try Self.publish(fx, ["--chunks-above", "1M"])
        let first = try String(contentsOfFile: fx.manifestPath, encoding: .utf8)
        #expect(!first.contains("path: \".mirror-chunks/set/b.img\"\n    size"), "the index is listed as a file: \(first)")
        try Self.publish(fx, ["--chunks-above", "1M"])
        #expect(try String(contentsOfFile: fx.manifestPath, encoding: .utf8) == first, "a rerun in place changed the manifest")

        let run = try fx.sync(["--seed", seed])
        #expect(run.exitCode == 0, "\(run)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("set/b.img")) == TestData.sha256(of: v2))
        let sent = Self.bytesSent(try fx.requests(atLeast: 2))
        #expect(sent < 1 << 20, "the server sent \(sent) bytes for one 4 KiB edit of a 16 MiB file")
    }

    /// A download of v2 killed half-way, then the manifest moves on to v3 (v2 with one 4 KiB
    /// edit): the partial file of v2 is the delta's base, so v3 costs about the half v2 lacked.
    @Test func aKilledDownloadOfAnEarlierVersionIsTheBase() throws {
        let fx = try SyncFixture()
        let image = fx.www + "/c.img"
        try TestData.writeFile(at: image, size: 32 << 20, seed: 81)
        try Self.publish(fx, ["--chunks-above", "1M"])
        let victim = try fx.startSync(["--limit-rate", "8m"])
        let partial = fx.destPath(".mirror/partial/" + PartialFile.name(for: "c.img"))
        try Wait.until("c.img's partial file holds 16 MiB or the run ended", timeout: 60) {
            fx.size(of: partial) >= 16 << 20 || !victim.isRunning
        }
        victim.signal(SIGKILL)
        _ = try victim.wait(timeout: 30)
        let held = fx.size(of: partial)
        #expect(held >= 16 << 20 && held < 32 << 20, "the partial file holds \(held) bytes")
        let before = try fx.requestsSoFar().count

        var v3 = [UInt8](try Data(contentsOf: URL(fileURLWithPath: image)))
        v3.replaceSubrange((1 << 20) ..< (1 << 20) + 4096, with: TestData.bytes(count: 4096, seed: 82))
        try Data(v3).write(to: URL(fileURLWithPath: image))
        try Self.publish(fx, ["--chunks-above", "1M"])
        let run = try fx.sync()
        #expect(run.exitCode == 0, "\(run)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("c.img")) == TestData.sha256(of: v3))
        let sent = Self.bytesSent(Array(try fx.requests(atLeast: before + 2).dropFirst(before)))
        #expect(sent <= (32 << 20) - held + (1 << 20), "the server sent \(sent) bytes; the partial file held \(held) of v2")
    }

    /// A delta through a cache that holds one damaged range (the fault server flips a byte in every
    /// answer that does not ask to revalidate): the whole file fails its digest, the chunks are
    /// checked against the index, and only the wrong range is fetched again, with
    /// `Cache-Control: no-cache`. Exit 0 and the right file, without a whole download.
    @Test func aDamagedChunkInACacheIsFetchedAgainAlone() throws {
        let fx = try FaultFixture()
        let tree = fx.dir.path("tree")
        try FileManager.default.createDirectory(atPath: tree, withIntermediateDirectories: true)
        let v1 = TestData.bytes(count: 8 << 20, seed: 91)
        try Data(v1).write(to: URL(fileURLWithPath: tree + "/disk.img"))
        func publish() throws -> String {
            let out = fx.dir.path("m.yaml")
            let run = try Mirror.run(["manifest", "create", tree, "--base-url", fx.server.baseURL,
                                "--chunks", "--chunks-above", "1M", "-o", out], timeout: 60)
            #expect(run.exitCode == 0, "\(run)")
            fx.server.serve("/.mirror-chunks/disk.img", bytes: [UInt8](try Data(contentsOf: URL(fileURLWithPath: tree + "/.mirror-chunks/disk.img"))))
            return out
        }
        fx.server.serve("/disk.img", bytes: v1)
        let m1 = try publish()
        let first = try Mirror.run(["sync", m1, "--dest", fx.dest], timeout: 60)
        #expect(first.exitCode == 0, "\(first)")

        var v2 = v1
        v2.insert(contentsOf: TestData.bytes(count: 256 << 10, seed: 92), at: 3 << 20)
        try Data(v2).write(to: URL(fileURLWithPath: tree + "/disk.img"))
        let flipped = Int64(3 << 20) + 5000
        fx.server.serve("/disk.img", bytes: v2, fault: .flipBytesUntilRevalidated(at: [flipped]))
        let m2 = try publish()
        let before = fx.server.requests().count
        let run = try Mirror.run(["sync", m2, "--dest", fx.dest], timeout: 60)
        #expect(run.exitCode == 0, "\(run)")
        #expect(try TestData.sha256(ofFileAt: fx.dest + "/disk.img") == TestData.sha256(of: v2))
        #expect(run.stderr.contains("not the chunk index's; fetching them again"), "\(run.stderr)")
        let requests = Array(fx.server.requests().dropFirst(before)).filter { $0.path == "/disk.img" }
        #expect(requests.allSatisfy { $0.status == 206 }, "a whole download: \(requests)")
        let again = requests.filter { $0.headers["cache-control"]?.contains("no-cache") == true }
        #expect(again.count == 1, "\(requests)")
        let sent = requests.reduce(0) { $0 + $1.bodyBytesSent }
        #expect(sent < 1 << 20, "the server sent \(sent) bytes")
    }
}
