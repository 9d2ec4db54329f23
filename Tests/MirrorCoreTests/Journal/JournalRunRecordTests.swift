@testable import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
@testable import MirrorKit
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A run record keeps why the run stopped and where its manifest came from, and the journal keeps
/// the last run that ended ok through a compaction (docs/journal.md, `run`).
@Suite struct JournalRunRecordTests {
    func folder(_ dir: TemporaryDirectory) throws -> FileDescriptor {
        let fd = open(dir.path, O_RDONLY | O_DIRECTORY)
        try #require(fd >= 0)
        return FileDescriptor(fd: fd, displayPath: dir.path)
    }

    @Test func reasonAndManifestRoundTripAndOlderRecordsStillRead() throws {
        let full = RunRecord(start: 1, end: 2, result: "failed", downloaded: 0, failed: 0, bytes: 9,
                             reason: "cannot write a b=c%: No space left on device", manifest: "saved_copy")
        let line = JournalRecord.run(full).encodedLine()
        #expect(JournalRecord.decode(line.dropLast()[...]) == .run(full))
        let old = RunRecord(start: 1, end: 2, result: "ok", downloaded: 1, failed: 0, bytes: 9)
        #expect(!String(decoding: JournalRecord.run(old).encodedLine(), as: UTF8.self).contains("reason="))
        #expect(JournalRecord.decode(JournalRecord.run(old).encodedLine().dropLast()[...]) == .run(old))
    }

    @Test func theLastSuccessOutlivesLaterRunsAndACompaction() throws {
        let dir = try TemporaryDirectory()
        let journal = try Journal(folder: try folder(dir), displayPath: "journal", readOnly: false)
        #expect(journal.lastSuccess == nil)
        let ok = RunRecord(start: 10, end: 20, result: "ok", downloaded: 1, failed: 0, bytes: 5, manifest: "fetched")
        try JournalWriter(journal).setUp(.run(ok), durable: false)
        let stopped = RunRecord(start: 30, end: 40, result: "incomplete", downloaded: 0, failed: 0, bytes: 0,
                                reason: "no source could be reached", manifest: "saved_copy")
        try JournalWriter(journal).setUp(.run(stopped), durable: true)
        #expect(journal.lastSuccess == ok)
        #expect(journal.lastRun == stopped)
        try JournalWriter(journal).compact(current: { _ in nil })
        let reopened = try Journal(folder: try folder(dir), displayPath: "journal", readOnly: true)
        #expect(reopened.lastSuccess == ok)
        #expect(reopened.lastRun == stopped)
    }

    /// Records after the last run record say a run was killed after it: the first `--atomic` run
    /// must not keep such a DEST as a version's set (a sequence walk found a kept g1 that mixed
    /// two versions). Counted as records are appended and as a reopened journal replays them.
    @Test func recordsAfterTheLastRunAreCountedAndSurviveAReopen() throws {
        let dir = try TemporaryDirectory()
        let ok = RunRecord(start: 10, end: 20, result: "ok", downloaded: 1, failed: 0, bytes: 5)
        do {
            let journal = try Journal(folder: try folder(dir), displayPath: "journal", readOnly: false)
            try JournalWriter(journal).setUp(.run(ok), durable: true)
            #expect(journal.recordsSinceLastRun == 0)
            try JournalWriter(journal).setUp(.forget(path: "a.bin"), durable: true)
            try JournalWriter(journal).setUp(.removed(path: "b.bin"), durable: true)
            // A file installed: its verified line is read back by the fast scan, and counts too.
            try JournalWriter(journal).setUp(JournalCompactionTests.verified(EntryIdentity(JournalCompactionTests.entry("c.bin", 3))), durable: true)
            #expect(journal.recordsSinceLastRun == 3)
        }
        let reopened = try Journal(folder: try folder(dir), displayPath: "journal", readOnly: true)
        #expect(reopened.lastRun == ok && reopened.recordsSinceLastRun == 3, "a killed run's records, read back")
        let again = try Journal(folder: try folder(dir), displayPath: "journal", readOnly: false)
        try JournalWriter(again).setUp(.run(ok), durable: true)
        #expect(again.recordsSinceLastRun == 0)
    }
}

/// A full disk names the entry, what it needs and what is free.
@Suite struct DiskSpaceTests {
    @Test func aFullDiskNamesTheEntryTheBytesNeededAndFree() {
        let raw = SystemError("write", "media/.mirror/partial/2fcf.part", code: ENOSPC)
        let said = DiskSpace.explain(raw, entry: "clips/a.mp4", needed: 3 << 20, free: 512 << 10).description
        #expect(said == "cannot write clips/a.mp4 (its partial download media/.mirror/partial/2fcf.part): No space left on device; "
            + "clips/a.mp4 needs 3.0 MiB more, 512.0 KiB free; free some space (or move DEST) and run again: what is downloaded is kept")
        let quota = DiskSpace.explain(SystemError("write", "p", code: EDQUOT), entry: "x", needed: 1, free: 99)
        #expect(!quota.description.contains("free;"), "a quota's room is not the file system's free space")
        let readOnly = SystemError("write", "p", code: EROFS)
        #expect(DiskSpace.explain(readOnly, entry: "x", needed: 1, free: 0) == readOnly)
    }

    @Test func theRunReasonPrefersTheErrorThatStoppedIt() {
        #expect(RunReason.text(fatal: nil, result: .ok) == nil)
        #expect(RunReason.text(fatal: nil, result: .incomplete("deadline passed")) == "deadline passed")
        #expect(RunReason.text(fatal: SystemError("write", "j", code: ENOSPC), result: .incomplete("stopped early"))
            == "cannot write j: No space left on device")
    }
}

/// The saved-copy line on standard error at most once a day.
@Suite struct SavedCopyNoticeTests {
    @Test func onceADay() {
        #expect(SavedCopyNotice.isDue(lastNoted: nil, now: 1000))
        #expect(!SavedCopyNotice.isDue(lastNoted: 1000, now: 1000 + 3600))
        #expect(SavedCopyNotice.isDue(lastNoted: 1000, now: 1000 + 86_400))
        #expect(SavedCopyNotice.isDue(lastNoted: 5000, now: 1000), "a clock set back does not silence it")
    }

    @Test func theManifestAgeIsNeverNegative() {
        let p = ManifestProvenance(source: .savedCopy, sha256: "ab", etag: nil, confirmed: 100)
        #expect(p.ageSeconds(now: 90) == 0)
        #expect(p.ageSeconds(now: 190) == 90)
        #expect(Formatting.ago(3 * 86_400 + 7200) == "3 d 2 h ago")
        #expect(Formatting.ago(5) == "5 s ago")
    }
}
