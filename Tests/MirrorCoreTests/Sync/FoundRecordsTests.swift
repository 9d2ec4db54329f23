import MirrorFS
@testable import MirrorCore
import MirrorState
import Testing

/// When files found in place are synced and journaled (``FoundRecords``): a second after the
/// first waiting record, or at the batch's limit, never with nothing waiting.
@Suite struct FoundRecordsTests {
    static func record(_ i: Int) -> VerifiedRecord {
        VerifiedRecord(identity: EntryIdentity(path: "f\(i)", size: 1, digests: [.sha256: String(repeating: "ab", count: 32)]),
                       inode: UInt64(i), device: 1, mtime: FileTime(seconds: 1, nanoseconds: 0), ctime: FileTime(seconds: 1, nanoseconds: 0))
    }

    @Test func aBatchIsDueASecondAfterItsFirstRecord() {
        var found = FoundRecords()
        #expect(!found.isDue(now: 1_000), "nothing waits")
        found.add(Self.record(0), now: 100)
        found.add(Self.record(1), now: 100.9)
        #expect(!found.isDue(now: 100.99))
        // The clock starts at the first record, not the last.
        #expect(found.isDue(now: 101))
    }

    @Test func aBatchIsDueAtItsLimitWhateverTheTime() {
        var found = FoundRecords()
        for i in 0 ..< FoundRecords.limit - 1 { found.add(Self.record(i), now: 5) }
        #expect(!found.isDue(now: 5))
        found.add(Self.record(FoundRecords.limit), now: 5)
        #expect(found.isDue(now: 5))
    }
}
