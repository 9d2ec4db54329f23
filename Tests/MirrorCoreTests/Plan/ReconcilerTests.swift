@testable import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
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

    func record(_ path: String, inode: UInt64) -> JournalRecord {
        .verified(VerifiedRecord(identity: EntryIdentity(ManifestEntry.fixture(path)), inode: inode, device: 1,
                                 mtime: FileTime(seconds: 1), ctime: FileTime(seconds: 1)))
    }

    @Test func unlistedPathsAreTheJournalsVerifiedOnesTheManifestDropped() throws {
        let nfc = "caf\u{E9}.bin", nfd = "cafe\u{301}.bin"
        for (i, path) in ["kept.bin", "gone/old.bin", nfd, "b.bin"].enumerated() {
            try JournalWriter(journal).setUp(record(path, inode: UInt64(i + 1)), durable: false)
        }
        let manifest = Manifest(sourceName: "m.yaml", entries: [.fixture("kept.bin"), .fixture(nfc), .fixture("new.bin"), .fixture("b.bin")])
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
        guard case .blocked(let why) = reconciler.action(for: .fixture("sub/g.bin")) else {
            Issue.record("a file where a folder should be must block the entry")
            return
        }
        #expect(why.contains("sub is a file, not a folder"), "\(why)")
    }

    /// Planning on several threads (more entries than one window, made small) decides exactly what
    /// planning one entry at a time decides, in manifest order: files verified by the journal, files
    /// present but unknown, folders in the way, nothing there, across many folders; for two, three
    /// and five threads, windows that do and do not divide the entries, and a last window of one.
    @Test func planningOnSeveralThreadsDecidesWhatOneThreadDecides() throws {
        var entries: [ManifestEntry] = []
        for k in 0 ..< 37 { #expect(mkdir(dir.path("d\(k)"), 0o755) == 0) }
        for i in 0 ..< 2000 {
            let folder = "d\(i % 37)"
            let path = "\(folder)/f\(i)"
            switch i % 5 {
            case 0, 1:
                _ = try TestData.writeFile(at: dir.path(path), size: 10, seed: UInt64(i))
                if i % 5 == 0, let status = try fx.destination.status(of: path) {
                    try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: EntryIdentity(ManifestEntry.fixture(path)), status: status)), durable: false)
                }
            case 2:
                #expect(mkdir(dir.path(path), 0o755) == 0)
            default:
                break
            }
            entries.append(.fixture(path))
        }
        let reconciler = Reconciler(planner: fx.planner, journal: journal)
        let one = entries.map { reconciler.action(for: $0) }
        for (threads, window) in [(2, 64), (3, 64), (5, 100), (3, 1999), (2, 7), (8, 2)] {
            var seen: [(String, PlannedAction)] = []
            reconciler.forEachAction(in: entries, window: window, threads: threads, known: nil) { seen.append(($0.path, $1)) }
            #expect(seen.map(\.0) == entries.map(\.path), "\(threads) threads, window \(window)")
            #expect(seen.map(\.1) == one, "\(threads) threads, window \(window)")
        }
        #expect(one.filter { $0 == .upToDate }.count == 400)
        #expect(one.filter { $0 == .check }.count == 400)
    }

    /// A `body` that throws part-way stops the walk: nothing after it is handed on, and the call
    /// returns (after the threads deciding the next window are done with the entries it lent).
    @Test func aThrowingBodyStopsTheWalk() throws {
        struct Stop: Error {}
        let entries = (0 ..< 500).map { ManifestEntry.fixture("f\($0)") }
        let reconciler = Reconciler(planner: fx.planner, journal: journal)
        var handed = 0
        #expect(throws: Stop.self) {
            try reconciler.forEachAction(in: entries, window: 64, threads: 3, known: nil) { _, _ in
                handed += 1
                if handed == 100 { throw Stop() }
            }
        }
        #expect(handed == 100)
    }
}
