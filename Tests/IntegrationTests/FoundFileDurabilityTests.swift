import Foundation
import Testing
import MirrorTestSupport

/// Files already at their paths are hashed and journaled `found=1`; mirror did not write their
/// bytes, and whoever did may not have synced them. Their records follow a `syncfs` of DEST's
/// file system (docs/journal.md, rule 1), seen in the run's own trace of its disk calls
/// (`MIRROR_TEST_TRACE`, MirrorFS's `DiskChange`).
@Suite struct FoundFileDurabilityTests {
    @Test func foundFilesAreJournaledOnlyAfterASyncOfTheirFileSystem() throws {
        let fx = try SyncFixture()
        var shas: [String] = []
        for i in 0 ..< 5 { shas.append(try fx.addFile("found/f\(i).bin", size: 20_000 + Int64(i), seed: UInt64(40 + i))) }
        try fx.writeManifest()
        // The manifest's bytes, written at the paths before any run and never synced by the test.
        try FileManager.default.createDirectory(atPath: fx.destPath("found"), withIntermediateDirectories: true)
        for i in 0 ..< 5 { try FileManager.default.copyItem(atPath: fx.www + "/found/f\(i).bin", toPath: fx.destPath("found/f\(i).bin")) }

        let trace = fx.dir.path("trace")
        let run = try Mirror.run(["sync", fx.manifestPath, "--dest", fx.dest], environment: ["MIRROR_TEST_TRACE": trace])
        #expect(run.exitCode == 0, "\(run)")
        #expect(try fx.requestsSoFar().isEmpty, "found in place, not downloaded")

        let ops = try TraceOp.parse(Array(try Data(contentsOf: URL(fileURLWithPath: trace))))
        let recording = ops.filter { $0.kind == "write" && String(decoding: $0.payload, as: UTF8.self).contains("found=1") }
        let first = try #require(recording.first, "no write of a found=1 record in the trace")
        let recorded = recording.map { String(decoding: $0.payload, as: UTF8.self) }.joined()
        for i in 0 ..< 5 { #expect(recorded.contains("path=found/f\(i).bin"), "found/f\(i).bin not journaled") }
        // A sync that reaches the found files: of their file system, or of each of them.
        var inodes = Set<UInt64>()
        for i in 0 ..< 5 {
            var st = stat()
            #expect(lstat(fx.destPath("found/f\(i).bin"), &st) == 0)
            inodes.insert(UInt64(st.st_ino))
        }
        let synced = ops.prefix(first.seq).contains { $0.kind == "syncfs" }
            || inodes.allSatisfy { inode in ops.prefix(first.seq).contains { ["fsync", "fdatasync"].contains($0.kind) && $0.ino == inode } }
        #expect(synced, "found=1 records written at #\(first.seq) before any sync: \(ops.prefix(first.seq).map(\.kind))")

        // Vouched for: the next run is a no-op that hashes nothing.
        let again = try fx.sync(["--json"])
        #expect(again.exitCode == 0 && again.stdout.contains("\"checked\":0"), "\(again)")
    }
}
