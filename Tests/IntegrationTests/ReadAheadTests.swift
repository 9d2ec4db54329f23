import Foundation
import Testing
import MirrorCore
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A run reads DEST's journal, under DEST's lock, while it reads the manifest, and plans the
/// entries read so far (docs/performance.md, "A no-op reads the journal while the manifest is
/// read"); an atomic no-op finds its set complete from each entry's `stat` and a count of the
/// set's files. None of it may hide a change, or put a manifest error behind a lock.
///
/// The data is made on disk and adopted (a first sync hashes what is there and sends no request:
/// the base URL is a port nothing listens on), so a manifest of many entries costs no server.
@Suite(.serialized)
struct ReadAheadTests {
    static let unreachable = "http://127.0.0.1:9/"

    /// `count` files of 16 bytes in `dest` (`dNN/fNNNN`), and a manifest of them, written to `manifest`.
    static func adoptedSet(_ dir: TemporaryDirectory, count: Int) throws -> (manifest: String, dest: String, paths: [String]) {
        let dest = dir.path("dest")
        var lines = ["version: 1", "base_url: \(unreachable)", "files:"]
        var paths: [String] = []
        for i in 0 ..< count {
            let folder = String(format: "d%02d", i / 1000)
            let path = folder + String(format: "/f%04d", i % 1000)
            if i % 1000 == 0 { try FileManager.default.createDirectory(atPath: dest + "/" + folder, withIntermediateDirectories: true) }
            let bytes = Array(String(format: "entry %09d\n", i).utf8)
            try Data(bytes).write(to: URL(fileURLWithPath: dest + "/" + path))
            lines += ["  - path: \(path)", "    size: \(bytes.count)", "    sha256: \(TestData.sha256(of: bytes))"]
            paths.append(path)
        }
        let manifest = dir.path("manifest.yaml")
        try (lines.joined(separator: "\n") + "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
        return (manifest, dest, paths)
    }

    static func files(_ run: ProcessResult) -> [String: Any] {
        let json = (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) as? [String: Any]
        return json?["files"] as? [String: Any] ?? [:]
    }

    /// 24,000 entries, so that the look-ahead takes batches of 4096 while the manifest is read:
    /// after one file in every 400 is removed and one in every 400 grows, the no-op finds exactly
    /// those, at every place in the manifest, and no other.
    @Test func aLargeNoOpStillFindsEveryChange() throws {
        let dir = try TemporaryDirectory()
        let set = try Self.adoptedSet(dir, count: 24_000)
        let first = try Mirror.run(["sync", set.manifest, "--dest", set.dest, "--json"], timeout: 300)
        #expect(first.exitCode == 0, "\(first)")
        #expect(Self.files(first)["up_to_date"] as? Int == 24_000, "\(first.stdout)")

        var changed: Set<String> = []
        for (i, path) in set.paths.enumerated() where i % 400 == 199 || i % 400 == 399 {
            let file = set.dest + "/" + path
            if i % 400 == 199 {
                #expect(unlink(file) == 0)
            } else {
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
                try handle.seekToEnd()
                try handle.write(contentsOf: Data("more".utf8))
                try handle.close()
            }
            changed.insert(path)
        }
        let second = try Mirror.run(["sync", set.manifest, "--dest", set.dest, "--json", "--retries", "0"], timeout: 300)
        // Nothing listens at the base URL: the changed entries fail (or wait, once the run stops
        // for want of a server), every other one is up to date.
        let counts = Self.files(second)
        #expect(counts["up_to_date"] as? Int == 24_000 - changed.count, "\(second.stdout)")
        #expect((counts["failed"] as? Int ?? 0) + (counts["pending"] as? Int ?? 0) == changed.count, "\(second.stdout)")
    }

    /// An invalid manifest is reported as invalid (65) even while another process holds DEST's
    /// lock, and a run that found the lock taken reports it (75) after reading the manifest; the
    /// lock a failed run took is given back, so the next run goes on.
    @Test func aManifestErrorComesBeforeTheLockAndLeavesItFree() throws {
        let dir = try TemporaryDirectory()
        let set = try Self.adoptedSet(dir, count: 20)
        #expect(try Mirror.run(["sync", set.manifest, "--dest", set.dest]).exitCode == 0)
        let invalid = dir.path("invalid.yaml")
        try "version: 1\nbase_url: \(Self.unreachable)\nfiles:\n  - path: a\n    size: -1\n".write(toFile: invalid, atomically: true, encoding: .utf8)

        let bad = try Mirror.run(["sync", invalid, "--dest", set.dest])
        #expect(bad.exitCode == 65, "\(bad)")
        let after = try Mirror.run(["sync", set.manifest, "--dest", set.dest])
        #expect(after.exitCode == 0, "the lock was kept: \(after)")

        let lock = open(set.dest + "/.mirror/lock", O_RDWR | O_CLOEXEC)
        try #require(lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) == 0)
        defer { close(lock) }
        let badWhileHeld = try Mirror.run(["sync", invalid, "--dest", set.dest])
        #expect(badWhileHeld.exitCode == 65, "\(badWhileHeld)")
        let held = try Mirror.run(["sync", set.manifest, "--dest", set.dest])
        #expect(held.exitCode == 75 && held.stderr.contains("another mirror run"), "\(held)")
    }

    /// A file put by hand into the set an atomic DEST shows is not part of a no-op: every entry is
    /// up to date there, but the set holds one file more, so the run builds and publishes the
    /// manifest's set, without it. A folder put there counts for nothing.
    @Test func aFileAddedToTheShownSetMakesTheNextRunPublish() throws {
        let dir = try TemporaryDirectory()
        let set = try Self.adoptedSet(dir, count: 30)
        #expect(try Mirror.run(["sync", set.manifest, "--dest", set.dest]).exitCode == 0)
        #expect(try Mirror.run(["sync", set.manifest, "--dest", set.dest, "--atomic"]).exitCode == 0)
        let store = set.dest + ".generations"
        let before = try FileManager.default.contentsOfDirectory(atPath: store).filter { $0.hasPrefix("g") }.sorted()

        try FileManager.default.createDirectory(atPath: set.dest + "/d00/empty-folder", withIntermediateDirectories: true)
        let noOp = try Mirror.run(["sync", set.manifest, "--dest", set.dest, "--atomic"])
        #expect(noOp.exitCode == 0, "\(noOp)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: store).filter { $0.hasPrefix("g") }.sorted() == before,
                "a folder made the no-op build a generation")

        try Data("not listed\n".utf8).write(to: URL(fileURLWithPath: set.dest + "/d00/extra"))
        let run = try Mirror.run(["sync", set.manifest, "--dest", set.dest, "--atomic"])
        #expect(run.exitCode == 0, "\(run)")
        let after = try FileManager.default.contentsOfDirectory(atPath: store).filter { $0.hasPrefix("g") }.sorted()
        #expect(after.count == before.count + 1, "no generation was published: \(before) then \(after)")
        #expect(!FileManager.default.fileExists(atPath: set.dest + "/d00/extra"), "the file not listed is in the set DEST shows")
        #expect(FileManager.default.fileExists(atPath: set.dest + "/" + set.paths[29]))
    }
}
