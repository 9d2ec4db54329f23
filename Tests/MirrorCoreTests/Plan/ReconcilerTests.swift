import Testing
import MirrorCore
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The whole plan, on a real folder and journal: one item per entry, and the files an earlier
/// run installed that the manifest no longer lists (compared as bytes).
@Suite struct ReconcilerTests {
    let fx: DestinationState
    var dir: TemporaryDirectory { fx.dir }
    var journal: Journal { fx.journal }

    init() throws { fx = try DestinationState() }

    func entry(_ path: String) -> ManifestEntry {
        ManifestEntry(path: path, url: .relative(path), size: 10, digests: [.sha256: Digest(bytes: [UInt8](repeating: 7, count: 32))])
    }

    func record(_ path: String, inode: UInt64) -> JournalRecord {
        .verified(VerifiedRecord(identity: EntryIdentity(entry(path)), inode: inode, device: 1,
                                 mtime: FileTime(seconds: 1), ctime: FileTime(seconds: 1)))
    }

    @Test func unlistedPathsAreTheJournalsVerifiedOnesTheManifestDropped() throws {
        let nfc = "caf\u{E9}.bin", nfd = "cafe\u{301}.bin"
        for (i, path) in ["kept.bin", "gone/old.bin", nfd, "b.bin"].enumerated() {
            try journal.append(record(path, inode: UInt64(i + 1)), durable: false)
        }
        let manifest = Manifest(sourceName: "m.yaml", entries: [entry("kept.bin"), entry(nfc), entry("new.bin"), entry("b.bin")])
        let reconciler = Reconciler(planner: fx.planner, journal: journal)
        let unlisted = reconciler.unlisted(by: manifest).map(\.identity.path)
        #expect(unlisted.map { Array($0.utf8) } == [nfd, "gone/old.bin"].map { Array($0.utf8) },
                "the NFD spelling is not the listed NFC one; sorted by bytes")

        let plan = reconciler.plan(manifest)
        #expect(plan.map(\.entry.path) == manifest.entries.map(\.path))
        #expect(plan.allSatisfy { $0.action == .download(replacing: false) }, "nothing is on disk yet")
    }

    @Test func anEntryThatCannotBeInspectedIsBlockedNotThrown() throws {
        let fd = open(dir.path("sub"), O_WRONLY | O_CREAT, 0o644)
        #expect(fd >= 0)
        close(fd)
        let reconciler = Reconciler(planner: fx.planner, journal: journal)
        guard case .blocked(let why) = reconciler.action(for: entry("sub/g.bin")) else {
            Issue.record("a file where a folder should be must block the entry")
            return
        }
        #expect(why.contains("sub is a file, not a folder"), "\(why)")
    }
}
