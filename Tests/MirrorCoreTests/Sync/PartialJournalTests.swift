import Testing
@testable import MirrorCore
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The records a download writes about its partial file, on a real journal.
@Suite struct PartialJournalTests {
    let dir: TemporaryDirectory
    let folder: FileDescriptor
    let journal: Journal
    static let identity = EntryIdentity(path: "a/b.bin", size: 100, digests: [.sha256: String(repeating: "ab", count: 32)])

    init() throws {
        dir = try TemporaryDirectory()
        let fd = open(dir.path, O_RDONLY | O_DIRECTORY)
        try #require(fd >= 0)
        folder = FileDescriptor(fd: fd, displayPath: dir.path)
        journal = try Journal(folder: folder, displayPath: "journal", readOnly: false)
    }

    @Test func aCheckpointIsBoundToTheFileItWasTakenOn() throws {
        let records = PartialJournal(journal: journal, identity: Self.identity)
        #expect(!records.hasRecord)
        let status = try folder.stat()
        try records.record(url: "http://h/b", validator: "\"v\"", bytes: 40, states: [.sha256: "00"], status: status)
        let reread = try Journal(folder: folder, displayPath: "journal", readOnly: true)
        let saved = try #require(reread.records(for: "a/b.bin")?.partial)
        #expect(saved.bytes == 40 && saved.segments == nil && saved.hashStates[.sha256] == "00")
        #expect(saved.fileInode == status.inode && saved.fileChangeTime == status.ctime)
        #expect(records.hasRecord)
    }

    @Test func keptBytesAreVouchedForWithoutAStateThatCouldBeTrusted() throws {
        let records = PartialJournal(journal: journal, identity: Self.identity)
        let segments = [SegmentRecord(start: 0, end: 50, done: 10), SegmentRecord(start: 50, end: 100, done: 5)]
        try records.record(url: "http://h/b", validator: nil, bytes: 10, segments: segments)
        let saved = try #require(journal.records(for: "a/b.bin")?.partial)
        #expect(saved.segments == segments && saved.durableBytes == 15)
        #expect(saved.fileInode == nil && saved.fileChangeTime == nil, "no file identity: a resume hashes again")
    }

    @Test func forgettingIsDurableAndOnlyWhenThereIsARecord() throws {
        let records = PartialJournal(journal: journal, identity: Self.identity)
        try records.forgetIfRecorded()
        try records.record(url: "http://h/b", validator: nil, bytes: 10)
        try records.forgetIfRecorded()
        let reread = try Journal(folder: folder, displayPath: "journal", readOnly: true)
        #expect(reread.records(for: "a/b.bin")?.partial == nil)
    }
}
