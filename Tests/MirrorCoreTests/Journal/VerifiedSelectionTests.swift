@testable import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport

/// Choosing verified records before decoding them (``VerifiedIndex/records(where:)``,
/// ``VerifiedIndex/ContentTable``): by path for `--delete`, by content for reuse. A record and an entry with the same size and digests have
/// the same ``ContentHash``; a record with other bytes, another size, or a digest only the entry
/// has, does not.
@Suite struct VerifiedSelectionTests {
    func index(_ entries: [ManifestEntry]) -> VerifiedIndex {
        var index = VerifiedIndex()
        for (i, entry) in entries.enumerated() {
            index.insert(VerifiedRecord(identity: EntryIdentity(entry), inode: UInt64(i + 1), device: 1,
                                        mtime: FileTime(seconds: 1), ctime: FileTime(seconds: 1)))
        }
        return index
    }

    @Test func aRecordIsPickedByTheContentOfAnEntryAndByNothingElse() throws {
        let stored: [ManifestEntry] = [
            .fixture("a.bin", size: 10, sha256: .filled(1)), .fixture("b.bin", size: 10, sha256: .filled(2)),
            .fixture("c.bin", size: 11, sha256: .filled(1)), .fixture("d.bin", size: 10, sha256: .filled(1), sha512: .filled(9, .sha512)),
        ]
        let index = index(stored)
        let table = index.contentTable()
        func picked(for entry: ManifestEntry) -> [String] {
            let wanted = ContentHash(size: entry.size, digests: entry.digests)
            let byTable = table.offsets(for: wanted).map { index.record(at: $0).identity.path }.sorted()
            #expect(byTable == index.records { $0.content == wanted }.map(\.identity.path).sorted())
            return byTable
        }
        #expect(picked(for: .fixture("renamed.bin", size: 10, sha256: .filled(1))) == ["a.bin"])
        #expect(picked(for: .fixture("x", size: 10, sha256: .filled(2))) == ["b.bin"])
        #expect(picked(for: .fixture("x", size: 12, sha256: .filled(1))).isEmpty, "another size")
        #expect(picked(for: .fixture("x", size: 10, sha256: .filled(1), sha512: .filled(9, .sha512))) == ["d.bin"], "both digests")
    }

    @Test func recordsArePickedByTheirPathsBytes() throws {
        let nfc = "caf\u{E9}.bin", nfd = "cafe\u{301}.bin"
        let index = index([.fixture(nfc, size: 1, sha256: .filled(1)), .fixture(nfd, size: 1, sha256: .filled(2)),
                           .fixture("dir/x", size: 1, sha256: .filled(3))])
        let keep = Set([nfc].map { PathKey($0) })
        let unlisted = index.records { !keep.contains(PathKey(bytes: Array($0.path))) }.map { Array($0.identity.path.utf8) }
        #expect(Set(unlisted) == Set([Array(nfd.utf8), Array("dir/x".utf8)]), "the NFD spelling is not the NFC one")
    }
}
