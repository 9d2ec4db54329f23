@testable import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorKit
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// ``PlanLookAhead``: what a dry run decides while the manifest is read, on a real folder and
/// journal. A bit may only ever say what the plan itself would say in the entry's turn.
@Suite struct PlanLookAheadTests {
    let fx: DestinationState
    var dir: TemporaryDirectory { fx.dir }

    init() throws { fx = try DestinationState() }

    /// 300 entries over 7 folders: verified and unchanged (up to date), verified then changed,
    /// present but unknown, a folder in the way, missing.
    func scene() throws -> [ManifestEntry] {
        for k in 0 ..< 7 { #expect(mkdir(dir.path("d\(k)"), 0o755) == 0) }
        var entries: [ManifestEntry] = []
        for i in 0 ..< 300 {
            let path = "d\(i % 7)/f\(i)"
            switch i % 5 {
            case 0, 1, 2:
                _ = try TestData.writeFile(at: dir.path(path), size: 10, seed: UInt64(i))
                if i % 5 != 2, let status = try fx.destination.status(of: path) {
                    try JournalWriter(fx.journal).setUp(.verified(VerifiedRecord(identity: EntryIdentity(ManifestEntry.fixture(path)), status: status)), durable: false)
                }
                // Verified, then written again: its stat no longer matches the record.
                if i % 5 == 1 { _ = try TestData.writeFile(at: dir.path(path), size: 10, seed: UInt64(i + 1000)) }
            case 3:
                #expect(mkdir(dir.path(path), 0o755) == 0)
            default:
                break
            }
            entries.append(.fixture(path))
        }
        return entries
    }

    func disk() -> Background<Result<ReadOnlyDestination, Error>> {
        let path = dir.path
        return Background { Result { try ReadOnlyDestination.open(path) } }
    }

    @Test func everyMarkedEntryIsUpToDateAndEveryUpToDateEntryHandedOverIsMarked() throws {
        let entries = try scene()
        let lookAhead = PlanLookAhead(disk: disk(), batchSize: 16)
        for (i, entry) in entries.enumerated() {
            lookAhead.offer(i, entry)
            // The thread keeps up here: no batch finds the queue full.
            if i % 16 == 15 { lookAhead.settle() }
        }
        let decided = lookAhead.finish()

        let truth = try planAgrees(entries, decided)
        #expect(truth.filter { $0 == .upToDate }.count == 60)
        let handedOver = entries.count / 16 * 16  // the last, partial batch stays with the reader
        for i in 0 ..< handedOver where truth[i] == .upToDate {
            #expect(decided.isUpToDate(i), "entry \(i) up to date but not marked")
        }
        #expect(!decided.isUpToDate(handedOver), "not handed over, not decided")
    }

    /// Every marked entry is one the plan finds up to date, and the plan with the marks is the
    /// plan without them, in order. Returns the plan.
    @discardableResult
    func planAgrees(_ entries: [ManifestEntry], _ decided: PlanLookAhead.Decided) throws -> [PlannedAction] {
        let reconciler = Reconciler(planner: fx.planner, journal: fx.journal)
        let truth = entries.map { reconciler.action(for: $0) }
        for i in entries.indices where decided.isUpToDate(i) { #expect(truth[i] == .upToDate, "entry \(i) marked but \(truth[i])") }
        var seen: [PlannedAction] = []
        reconciler.forEachAction(in: entries, window: 32, known: decided) { seen.append($1) }
        #expect(seen == truth)
        return truth
    }

    @Test func batchesThatFindTheQueueFullAreLeftToThePlan() throws {
        let entries = try scene()
        let lookAhead = PlanLookAhead(disk: disk(), batchSize: 4)
        // All at once, likely before the journal is read: only maxWaiting batches wait; the rest
        // are not handed over, and nothing wrong is ever marked.
        for (i, entry) in entries.enumerated() { lookAhead.offer(i, entry) }
        lookAhead.settle()
        try planAgrees(entries, lookAhead.finish())
    }

    @Test func entriesOutOfOrderEndTheHandingOver() throws {
        let entries = try scene()
        let lookAhead = PlanLookAhead(disk: disk(), batchSize: 8)
        for i in 0 ..< 16 { lookAhead.offer(i, entries[i]) }
        // Read again from the start (libyaml after the fast scanner gave up): nothing more is taken.
        for i in 0 ..< 64 { lookAhead.offer(i, entries[i]) }
        lookAhead.settle()
        let decided = lookAhead.finish()
        #expect((0 ..< 16).filter { decided.isUpToDate($0) }.count == 4, "entries 0, 5, 10 and 15 of the first pass")
        #expect(!(16 ..< 64).contains { decided.isUpToDate($0) })
    }

    @Test func withoutAJournalNothingIsDecided() throws {
        let bare = try TemporaryDirectory()
        let path = bare.path
        let lookAhead = PlanLookAhead(disk: Background { Result { try ReadOnlyDestination.open(path) } }, batchSize: 4)
        for i in 0 ..< 40 { lookAhead.offer(i, .fixture("f\(i)")) }
        let decided = lookAhead.finish()
        #expect(!(0 ..< 40).contains { decided.isUpToDate($0) })
    }
}
