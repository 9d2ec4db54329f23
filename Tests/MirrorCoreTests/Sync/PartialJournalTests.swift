@testable import MirrorState
import Testing
@testable import MirrorCore
import MirrorTestSupport

/// The records a download writes about its partial file, on a real journal.
@Suite struct PartialJournalTests {
    let fx: DestinationState
    var journal: Journal { fx.journal }
    static let identity = EntryIdentity(path: "a/b.bin", size: 100, digests: [.sha256: String(repeating: "ab", count: 32)])

    init() throws { fx = try DestinationState() }

    func reread() throws -> Journal { try Journal(folder: fx.state, displayPath: "journal", readOnly: true) }

    @Test func aCheckpointIsBoundToTheFileItWasTakenOn() throws {
        let records = PartialJournal(writer: JournalWriter(journal), identity: Self.identity)
        #expect(!records.hasRecord)
        let status = try fx.partials.stat()
        try records.checkpoint(url: "http://h/b", validator: "\"v\"", bytes: 40, states: [.sha256: "00"], segments: nil,
                               status: status, proof: try fx.partials.sync())
        let reread = try reread()
        let saved = try #require(reread.records(for: "a/b.bin")?.partial)
        #expect(saved.bytes == 40 && saved.segments == nil && saved.hashStates[.sha256] == "00")
        #expect(saved.fileInode == status.inode && saved.fileChangeTime == status.ctime)
        #expect(records.hasRecord)
    }

    @Test func keptBytesAreVouchedForWithoutAStateThatCouldBeTrusted() throws {
        let records = PartialJournal(writer: JournalWriter(journal), identity: Self.identity)
        let segments = [SegmentRecord(start: 0, end: 50, done: 10), SegmentRecord(start: 50, end: 100, done: 5)]
        try records.record(url: "http://h/b", validator: nil, bytes: 10, segments: segments)
        let saved = try #require(journal.records(for: "a/b.bin")?.partial)
        #expect(saved.segments == segments && saved.durableBytes == 15)
        #expect(saved.fileInode == nil && saved.fileChangeTime == nil, "no file identity: a resume hashes again")
    }

    @Test func forgettingIsDurableAndOnlyWhenThereIsARecord() throws {
        let records = PartialJournal(writer: JournalWriter(journal), identity: Self.identity)
        try records.forgetIfRecorded()
        try records.record(url: "http://h/b", validator: nil, bytes: 10)
        try records.forgetIfRecorded()
        let reread = try reread()
        #expect(reread.records(for: "a/b.bin")?.partial == nil)
    }
}
