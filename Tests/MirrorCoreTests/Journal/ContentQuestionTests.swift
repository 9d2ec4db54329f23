@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorModel
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Reuse by content asks the journal which verified files hold an entry's bytes
/// (``Journal/verifiedRecords(size:digests:)``): the first questions by a pass over the records,
/// the later ones by the content table. Both give the latest records of exactly that content,
/// never one a later record of its path replaced, and the table is made only past the passes.
@Suite struct ContentQuestionTests {
    static func verified(_ entry: ManifestEntry, inode: UInt64) -> JournalRecord {
        .verified(VerifiedRecord(identity: EntryIdentity(entry), inode: inode, device: 1,
                                 mtime: FileTime(seconds: 1), ctime: FileTime(seconds: 1)))
    }

    @Test func passesThenTheTableGiveTheSameLatestRecords() throws {
        let dir = try TemporaryDirectory()
        let folder = FileDescriptor(fd: open(dir.path, O_RDONLY | O_DIRECTORY), displayPath: dir.path)
        let journal = try Journal(folder: folder, displayPath: "journal", readOnly: false)
        let writer = JournalWriter(journal)
        let wanted = ManifestEntry.fixture("wanted", size: 7, sha256: .filled(7))
        try writer.setUp([
            Self.verified(.fixture("a", size: 7, sha256: .filled(7)), inode: 1),
            // Replaced below by another content: its first record holds the bytes no longer.
            Self.verified(.fixture("b", size: 7, sha256: .filled(7)), inode: 2),
            Self.verified(.fixture("other size", size: 8, sha256: .filled(7)), inode: 3),
            Self.verified(.fixture("other digest", size: 7, sha256: .filled(9)), inode: 4),
            Self.verified(.fixture("both", size: 7, sha256: .filled(7), sha512: .filled(1, .sha512)), inode: 5),
        ])
        try writer.setUp([
            Self.verified(.fixture("b", size: 7, sha256: .filled(8)), inode: 6),
            // Replaced by the same content: its latest record is the one given.
            Self.verified(.fixture("a", size: 7, sha256: .filled(7)), inode: 9),
        ])
        for question in 1 ... Journal.scansBeforeTable + 3 {
            let found = journal.verifiedRecords(size: wanted.size, digests: wanted.digests)
            #expect(found.map(\.identity.path).sorted() == ["a"], "question \(question): \(found.map(\.identity.path))")
            #expect(found.first?.inode == 9, "question \(question)")
            #expect((journal.contentTable != nil) == (question > Journal.scansBeforeTable), "question \(question)")
        }
    }
}
