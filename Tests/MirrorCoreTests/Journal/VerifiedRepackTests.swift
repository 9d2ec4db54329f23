import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Records replaced by later ones of their paths, or removed, leave dead bytes in the index's
/// arena; once they are over half of it, the live ones are moved down in place
/// (``VerifiedIndex/repack()``). Every path must still find its latest record, and a content
/// table made before a repack must not be used after it.
@Suite struct VerifiedRepackTests {
    static func record(_ path: String, round: Int, text: Bool = false) throws -> VerifiedRecord {
        // Now and then a digest kept as text (not lowercase hex of the right length), which a
        // record holds in a field of its own length.
        let sha = text ? "NOT-HEX-\(round)" : Digest.filled(UInt8(truncatingIfNeeded: round)).hex
        return VerifiedRecord(identity: EntryIdentity(path: path, size: Int64(round), digests: [.sha256: sha]),
                              inode: UInt64(round), device: 1, mtime: FileTime(seconds: 1), ctime: FileTime(seconds: 2))
    }

    @Test func manyReplacementsKeepEveryLatestRecordInLittleRoom() throws {
        var index = VerifiedIndex()
        let paths = (0 ..< 2000).map { "folder \($0 % 7)/file-\($0).bin" }
        let rounds = 120  // about 25 MB of records, 24 of them dead by the end
        for round in 0 ..< rounds {
            for (i, path) in paths.enumerated() {
                index.insert(try Self.record(path, round: round, text: (i + round) % 97 == 0))
            }
            if round == 60 {
                for path in paths.prefix(100) { path.utf8CString.dropLast().withUnsafeBufferPointer { raw in
                    raw.withMemoryRebound(to: UInt8.self) { index.remove(path: $0) }
                } }
            }
        }
        #expect(index.repacks > 0)
        #expect(index.count == paths.count)
        // Without repacking, about 26 MB; with it, the live records and less than the floor of dead ones.
        #expect(index.arena.count <= VerifiedIndex.repackFloor + 1 << 20, "\(index.arena.count) bytes for \(index.count) records")
        for (i, path) in paths.enumerated() {
            var key = path
            let found = key.withUTF8 { index.record(for: $0) }
            #expect(found == (try Self.record(path, round: rounds - 1, text: (i + rounds - 1) % 97 == 0)), "\(path)")
        }
    }

    @Test func aContentTableMadeBeforeARepackIsMadeAgain() throws {
        let dir = try TemporaryDirectory()
        let folder = FileDescriptor(fd: open(dir.path, O_RDONLY | O_DIRECTORY), displayPath: dir.path)
        let journal = try Journal(folder: folder, displayPath: "journal", readOnly: false)
        // Records that will be dead, ahead of the one asked for, so that a repack moves it.
        try JournalWriter(journal).setUp((0 ..< 2000).map { .verified(try Self.record("churn-\($0)", round: 0)) })
        let wanted = ManifestEntry.fixture("kept.bin", size: 7, sha256: .filled(7))
        try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: EntryIdentity(wanted), inode: 7, device: 1,
                                                    mtime: FileTime(seconds: 1), ctime: FileTime(seconds: 1))), durable: false)
        let content = ContentHash(size: wanted.size, digests: wanted.digests)
        #expect(journal.verifiedRecords(withContent: content).map(\.identity.path) == ["kept.bin"])
        let repacksBefore = journal.verified.repacks
        // Enough replaced records to repack the arena: every offset in the first table moves.
        var batch: [JournalRecord] = []
        for round in 1 ... 120 {
            for i in 0 ..< 2000 { batch.append(.verified(try Self.record("churn-\(i)", round: round))) }
            try JournalWriter(journal).setUp(batch)
            batch.removeAll(keepingCapacity: true)
        }
        #expect(journal.verified.repacks > repacksBefore)
        #expect(journal.verifiedRecords(withContent: content).map(\.identity.path) == ["kept.bin"])
    }
}
