import Foundation
import MirrorModel
import MirrorState
import Testing
import MirrorCore
import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `mirror status` decides from the journal and one stat per entry; these tests build both by hand
/// in a real folder and check each state, and that looking changes nothing on disk.
@Suite struct StatusInspectorTests {
    let dir: TemporaryDirectory
    let dest: String

    init() throws {
        dir = try TemporaryDirectory()
        dest = dir.path("dest")
        try FileManager.default.createDirectory(atPath: dest, withIntermediateDirectories: true)
    }

    /// A manifest of five entries, with a journal that says: a.bin verified, b.bin 40% partial,
    /// c.bin failed, d.bin never seen (but a file is there), e.bin missing; and a last run.
    func scenario() throws -> (Manifest, [String: ManifestEntry]) {
        var entries: [String: ManifestEntry] = [:]
        for (i, name) in ["a.bin", "b.bin", "c.bin", "d.bin", "e.bin"].enumerated() {
            let sha = try TestData.writeFile(at: dir.path("src/\(name)"), size: 1000, seed: UInt64(i))
            entries[name] = try .fixture(name, size: 1000, sha256: .parsed(sha))
        }
        let destination = try Destination.create(dest)
        let state = try #require(try destination.stateFolder(create: true))
        let partials = try #require(try destination.stateFolder("partial", create: true))
        let journal = try Journal(folder: state, displayPath: "journal", readOnly: false)

        try FileManager.default.copyItem(atPath: dir.path("src/a.bin"), toPath: dir.path("dest/a.bin"))
        let a = try #require(try destination.status(of: "a.bin"))
        try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: EntryIdentity(try #require(entries["a.bin"])), status: a)), durable: true)

        let partialPath = dir.path("dest/.mirror/partial/" + PartialFile.name(for: "b.bin"))
        try Data(TestData.bytes(count: 400, seed: 1)).write(to: URL(fileURLWithPath: partialPath))
        _ = partials
        try JournalWriter(journal).setUp(.partial(PartialRecord(identity: EntryIdentity(try #require(entries["b.bin"])), url: "http://x/b.bin",
                                                  validator: nil, bytes: 400)), durable: true)

        try JournalWriter(journal).setUp(.failed(FailedRecord(identity: EntryIdentity(try #require(entries["c.bin"])),
                                                error: "checksum mismatch after 3 attempts", time: 1_763_780_000)), durable: true)
        try FileManager.default.copyItem(atPath: dir.path("src/d.bin"), toPath: dir.path("dest/d.bin"))
        try JournalWriter(journal).setUp(.run(RunRecord(start: 1_763_780_000, end: 1_763_780_065, result: "failed",
                                          downloaded: 1, failed: 1, bytes: 1400)), durable: true)
        let order = ["a.bin", "b.bin", "c.bin", "d.bin", "e.bin"].compactMap { entries[$0] }
        return (Manifest(sourceName: "m.yaml", entries: order), entries)
    }

    @Test func eachEntryGetsTheStateTheJournalAndStatSupport() throws {
        let (manifest, _) = try scenario()
        let status = try StatusInspector.inspect(manifest: manifest, destinationPath: dest)
        let byPath = Dictionary(uniqueKeysWithValues: status.entries.map { ($0.path, $0) })
        #expect(byPath["a.bin"] == nil, "a done entry is counted, not kept")
        #expect(status.count(.done) == 1 && status.bytes(.done) == 1000)
        #expect(status.totalFiles == 5 && status.totalBytes == 5000)
        #expect(byPath["b.bin"]?.state == .partial)
        #expect(byPath["b.bin"]?.partialBytes == 400)
        #expect(byPath["b.bin"]?.percent == 40)
        #expect(byPath["c.bin"]?.state == .failed)
        #expect(byPath["c.bin"]?.error == "checksum mismatch after 3 attempts")
        #expect(byPath["c.bin"]?.failedAt == 1_763_780_000)
        #expect(byPath["d.bin"]?.state == .unverified)
        #expect(byPath["e.bin"]?.state == .missing)
        #expect(status.lastRun?.result == "failed")
        #expect(status.lastRun?.end == 1_763_780_065)
        #expect(status.runningPid == nil)
        #expect(status.text.contains("partial     b.bin: 40.0% (400 B of 1000 B)"), "\(status.text)")
        #expect(status.text.contains("last run: 2025-11-22T02:53:20Z to 2025-11-22T02:54:25Z, failed"), "\(status.text)")
    }

    /// A segmented partial counts what a sync would resume from (every segment's durable bytes),
    /// not the hashed prefix, which may be nothing at all when a later segment ran ahead.
    @Test func aSegmentedPartialShowsItsDurableBytes() throws {
        let sha = try TestData.writeFile(at: dir.path("src/big.bin"), size: 1000, seed: 9)
        let big = try ManifestEntry.fixture("big.bin", size: 1000, sha256: .parsed(sha))
        let destination = try Destination.create(dest)
        let state = try #require(try destination.stateFolder(create: true))
        _ = try #require(try destination.stateFolder("partial", create: true))
        let journal = try Journal(folder: state, displayPath: "journal", readOnly: false)
        let partialPath = dir.path("dest/.mirror/partial/" + PartialFile.name(for: "big.bin"))
        try Data(TestData.bytes(count: 1000, seed: 2)).write(to: URL(fileURLWithPath: partialPath))
        let segments = [SegmentRecord(start: 0, end: 500, done: 0), SegmentRecord(start: 500, end: 1000, done: 300)]
        try JournalWriter(journal).setUp(.partial(PartialRecord(identity: EntryIdentity(big), url: "http://x/big.bin", validator: "\"v\"",
                                                  bytes: 0, segments: segments)), durable: true)
        let status = try StatusInspector.inspect(manifest: Manifest(sourceName: "m.yaml", entries: [big]), destinationPath: dest)
        #expect(status.entries.first?.state == .partial)
        #expect(status.entries.first?.partialBytes == 300)
    }

    @Test func aTouchedFileIsNoLongerDoneAndARecordForAnotherVersionIsIgnored() throws {
        let (manifest, entries) = try scenario()
        // a.bin rewritten with the same bytes: its ctime changes, so the journal cannot vouch for it.
        let data = try Data(contentsOf: URL(fileURLWithPath: dir.path("dest/a.bin")))
        try FileClock.waitUntilPastTimes(of: dir.path("dest/a.bin"))
        try data.write(to: URL(fileURLWithPath: dir.path("dest/a.bin")))
        // The manifest now lists another version of b.bin: its partial record is obsolete.
        var changed = manifest
        let b = try #require(entries["b.bin"])
        changed.entries[1] = .fixture("b.bin", size: 2000, sha256: b.digests[.sha256])
        let status = try StatusInspector.inspect(manifest: changed, destinationPath: dest)
        #expect(status.entries[0].state == .unverified)
        #expect(status.entries[1].state == .missing)
        #expect(status.entries[1].partialBytes == nil)
    }

    @Test func lookingChangesNothingAndCreatesNothing() throws {
        let (manifest, _) = try scenario()
        // A torn tail a sync in progress could be writing: status must neither trust nor cut it.
        let journalPath = dir.path("dest/.mirror/journal")
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: journalPath))
        handle.seekToEndOfFile()
        handle.write(Data("0badc0de partial path=half".utf8))
        handle.closeFile()
        let before = try TestData.sha256(ofFileAt: journalPath)
        _ = try StatusInspector.inspect(manifest: manifest, destinationPath: dest)
        #expect(try TestData.sha256(ofFileAt: journalPath) == before)
        #expect(!FileManager.default.fileExists(atPath: dir.path("dest/.mirror/lock")))

        let fresh = dir.path("fresh")
        try FileManager.default.createDirectory(atPath: fresh, withIntermediateDirectories: true)
        let empty = try StatusInspector.inspect(manifest: manifest, destinationPath: fresh)
        #expect(empty.entries.allSatisfy { $0.state == .missing })
        #expect(!FileManager.default.fileExists(atPath: fresh + "/.mirror"))
        let absent = try StatusInspector.inspect(manifest: manifest, destinationPath: dir.path("absent"))
        #expect(!absent.destinationExists)
        #expect(!FileManager.default.fileExists(atPath: dir.path("absent")))
    }

    @Test func aHeldLockNamesItsHolderWithoutBeingTaken() throws {
        let (manifest, _) = try scenario()
        let lock = try #require(try DestinationLock.take(DestinationIdentity.resolve(dest), creating: .nothing, wait: false))
        let status = try StatusInspector.inspect(manifest: manifest, destinationPath: dest)
        #expect(status.runningPid == Int(getpid()))
        #expect(status.text.contains("a sync is running, pid \(getpid())"))
        lock.release()
        #expect(try StatusInspector.inspect(manifest: manifest, destinationPath: dest).runningPid == nil)
    }

    /// The first atomic run holds the lock in the store before it has made DEST: status names it.
    @Test func aFirstAtomicRunIsSeenBeforeDestExists() throws {
        let (manifest, _) = try scenario()
        let fresh = dir.path("first")
        try FileManager.default.createDirectory(atPath: fresh + ".generations/.mirror", withIntermediateDirectories: true)
        let lock = try #require(try DestinationLock.take(DestinationIdentity.resolve(fresh), creating: .nothing, wait: false))
        defer { lock.release() }
        let status = try StatusInspector.inspect(manifest: manifest, destinationPath: fresh)
        #expect(!status.destinationExists)
        #expect(status.runningPid == Int(getpid()))
    }

    @Test func jsonParsesAndCarriesEveryCount() throws {
        let (manifest, _) = try scenario()
        let status = try StatusInspector.inspect(manifest: manifest, destinationPath: dest)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(status.json.utf8)) as? [String: Any])
        let files = try #require(object["files"] as? [String: Any])
        #expect(files["total"] as? Int == 5)
        #expect(files["done"] as? Int == 1)
        #expect(files["partial"] as? Int == 1)
        #expect(files["failed"] as? Int == 1)
        #expect(files["unverified"] as? Int == 1)
        #expect(files["missing"] as? Int == 1)
        let entries = try #require(object["entries"] as? [[String: Any]])
        #expect(entries.map { $0["path"] as? String } == ["b.bin", "c.bin", "d.bin", "e.bin"])
        #expect(entries[0]["percent"] as? Double == 40)
        #expect(entries[0]["partial_bytes"] as? Int == 400)
        #expect(entries[1]["error"] as? String == "checksum mismatch after 3 attempts")
        let run = try #require(object["last_run"] as? [String: Any])
        #expect(run["result"] as? String == "failed")
        #expect(run["start"] as? String == "2025-11-22T02:53:20Z")
        #expect(run["bytes"] as? Int == 1400)
        #expect(object["sync_running"] as? Bool == false)
    }
}
