import Foundation
import MirrorModel
import Testing
import MirrorCore
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `mirror verify` trusts only the bytes: every kind of damage is found and named, with what was
/// expected and what was found, and no symlink is followed out of DEST.
@Suite struct VerifyRunnerTests {
    let dir: TemporaryDirectory
    let dest: String
    var entries: [ManifestEntry] = []

    init() throws {
        dir = try TemporaryDirectory()
        dest = dir.path("dest")
        for (i, path) in ["a.bin", "deep/b.bin", "c.bin", "d.bin", "e.bin", "f.bin"].enumerated() {
            let size = Int64(100_000 + i * 1000)
            let sha = try TestData.writeFile(at: dest + "/" + path, size: size, seed: UInt64(i))
            entries.append(try .fixture(path, size: size, sha256: .parsed(sha)))
        }
    }

    var manifest: Manifest { Manifest(sourceName: "m.yaml", entries: entries) }

    @Test func anIntactTreeIsGoodOnOneThreadOrMany() throws {
        for threads in [1, 4] {
            let summary = VerifyRunner(manifest: manifest, destinationPath: dest, threads: threads).run()
            #expect(summary.isGood, "\(summary.problems)")
            #expect(summary.good == entries.count)
            #expect(summary.bytesRead == entries.reduce(0) { $0 + $1.size })
        }
    }

    @Test func everyKindOfDamageIsNamed() throws {
        // c.bin: one flipped byte in the middle.
        let c = dest + "/c.bin"
        let fd = open(c, O_RDWR)
        try #require(fd >= 0)
        var byte: UInt8 = 0
        #expect(pread(fd, &byte, 1, 50_000) == 1)
        byte ^= 0xff
        #expect(pwrite(fd, &byte, 1, 50_000) == 1)
        close(fd)
        // d.bin: gone. e.bin: one byte shorter. f.bin: a symlink to a copy outside DEST that would match.
        #expect(unlink(dest + "/d.bin") == 0)
        #expect(truncate(dest + "/e.bin", off_t(entries[4].size - 1)) == 0)
        #expect(rename(dest + "/f.bin", dir.path("outside.bin")) == 0)
        #expect(symlink(dir.path("outside.bin"), dest + "/f.bin") == 0)
        // deep/: replaced by a symlink to a folder outside DEST holding a matching b.bin.
        #expect(rename(dest + "/deep", dir.path("outside")) == 0)
        #expect(symlink(dir.path("outside"), dest + "/deep") == 0)

        let summary = VerifyRunner(manifest: manifest, destinationPath: dest, threads: 3).run()
        #expect(!summary.isGood)
        #expect(summary.good == 1)
        let byPath = Dictionary(uniqueKeysWithValues: summary.problems.map { ($0.path, $0) })
        #expect(summary.problems.map(\.path) == ["deep/b.bin", "c.bin", "d.bin", "e.bin", "f.bin"], "manifest order")

        let flipped = try #require(byPath["c.bin"])
        #expect(flipped.kind == .corrupt)
        #expect(flipped.expectedSHA256 == entries[2].digests[.sha256]?.hex)
        #expect(flipped.actualSHA256 == (try TestData.sha256(ofFileAt: c)))
        #expect(flipped.expectedSHA256 != flipped.actualSHA256)
        #expect(flipped.message.contains("expected sha256 \(entries[2].digests[.sha256]?.hex ?? "")"))
        #expect(flipped.message.contains("got \(flipped.actualSHA256 ?? "")"))

        #expect(byPath["d.bin"]?.kind == .missing)
        #expect(byPath["e.bin"]?.kind == .corrupt)
        #expect(byPath["e.bin"]?.actualSize == entries[4].size - 1)
        #expect(byPath["e.bin"]?.message == "size mismatch (expected \(entries[4].size) bytes, got \(entries[4].size - 1))")
        #expect(byPath["f.bin"]?.kind == .corrupt)
        #expect(byPath["f.bin"]?.message.contains("symbolic link") == true)
        // The folder link is refused by openat(O_NOFOLLOW), not followed to the matching copy.
        #expect(byPath["deep/b.bin"]?.kind == .unreadable, "\(String(describing: byPath["deep/b.bin"]))")
        #expect(summary.bytesRead == entries[0].size + entries[2].size, "only a.bin and c.bin were read")

        let object = try #require(try JSONSerialization.jsonObject(with: Data(summary.json.utf8)) as? [String: Any])
        #expect(object["result"] as? String == "failed")
        let files = try #require(object["files"] as? [String: Any])
        #expect(files["good"] as? Int == 1)
        #expect(files["corrupt"] as? Int == 3)
        #expect(files["missing"] as? Int == 1)
        #expect(files["unreadable"] as? Int == 1)
        let problems = try #require(object["problems"] as? [[String: Any]])
        let c2 = try #require(problems.first { $0["path"] as? String == "c.bin" })
        #expect(c2["state"] as? String == "corrupt")
        #expect(c2["expected_sha256"] as? String == entries[2].digests[.sha256]?.hex)
        #expect(c2["actual_sha256"] as? String == flipped.actualSHA256)
    }

    @Test func aMissingDestinationMeansEveryFileIsMissing() throws {
        let summary = VerifyRunner(manifest: manifest, destinationPath: dir.path("nowhere")).run()
        #expect(summary.count(.missing) == entries.count)
        #expect(!FileManager.default.fileExists(atPath: dir.path("nowhere")))
    }

    @Test func progressReachesTheTotals() throws {
        let seen = Box()
        let summary = VerifyRunner(manifest: manifest, destinationPath: dest, threads: 2).run { seen.last = $0 }
        #expect(summary.isGood)
        // onIdle may not fire on a fast machine; when it did, it never overshoots.
        if let last = seen.last {
            #expect(last.filesDone <= last.filesTotal && last.bytesDone <= last.bytesTotal)
            #expect(last.filesTotal == entries.count)
        }
    }

    final class Box: @unchecked Sendable { var last: VerifyProgress? }
}

@Suite struct VerifyProgressLineTests {
    @Test func theLineShowsFilesBytesRateAndETA() {
        let p = VerifyProgress(filesDone: 1, filesTotal: 4, bytesDone: 100 << 20, bytesTotal: 400 << 20, seconds: 2)
        #expect(p.line == "verifying 1/4 files, 100.0 MiB of 400.0 MiB, 50.0 MiB/s, ETA 6.0 s")
        let start = VerifyProgress(filesDone: 0, filesTotal: 4, bytesDone: 0, bytesTotal: 400 << 20, seconds: 0.1)
        #expect(start.line == "verifying 0/4 files, 0 B of 400.0 MiB")
    }
}
