import Foundation
import Testing
import MirrorTestSupport

/// Power loss is not SIGKILL: each scenario's run is recorded through MirrorFS's `DiskChange`
/// (`MIRROR_TEST_TRACE`), and states a power cut can leave on ext4 `data=ordered` are built from
/// the trace (``CrashModel``; the model in words: docs/journal.md, "Power loss, as the tests
/// model it"). On each, the next `status`, `sync`, `verify` (and `rollback`) run and the
/// invariants of ``SequenceTests`` are checked (``CrashExplorer``).
///
/// CI runs ``defaultStates`` states per scenario. `MIRROR_CRASH_STATES=N` runs N per scenario,
/// `MIRROR_CRASH_STATE_SEED=S` replays a seed, `MIRROR_CRASH_STATE_ONLY=I` only its state I.
@Suite(.serialized) struct CrashStateTests {
    static let defaultStates = 30

    static func explore(_ scenario: CrashScenario) throws {
        let env = ProcessInfo.processInfo.environment
        let seed = env["MIRROR_CRASH_STATE_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        let states = env["MIRROR_CRASH_STATES"].flatMap { Int($0) } ?? defaultStates
        var explorer = CrashExplorer(scenario, seed: seed, states: states, only: env["MIRROR_CRASH_STATE_ONLY"].flatMap { Int($0) })
        let started = Date()
        do {
            try explorer.run()
        } catch {
            Issue.record("crash-state explorer: scenario \(scenario.name), seed \(seed): \(error)")
        }
        for problem in explorer.problems { Issue.record("\(problem)") }
        print("crash states: \(scenario.name): seed \(seed), \(explorer.traceLength) calls recorded, \(explorer.explored) states "
              + "(\(explorer.statesByRegion.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")); "
              + "\(explorer.duplicates) drawn twice), \(explorer.problems.count) failing, in \(Int(Date().timeIntervalSince(started))) s")
    }

    @Test func firstSyncOfManySmallFiles() throws { try Self.explore(CrashScenarios.groupCommit) }
    @Test func resumedSegmentedLargeFile() throws { try Self.explore(CrashScenarios.resumedSegments) }
    @Test func deleteRun() throws { try Self.explore(CrashScenarios.deletion) }
    @Test func atomicPublishWithPruning() throws { try Self.explore(CrashScenarios.atomicPublish) }
    @Test func rollback() throws { try Self.explore(CrashScenarios.rollback) }
    @Test func journalCompaction() throws { try Self.explore(CrashScenarios.compaction) }
    @Test func conversionToAtomic() throws { try Self.explore(CrashScenarios.conversion) }
    @Test func chunkDelta() throws { try Self.explore(CrashScenarios.chunkDelta) }
    @Test func noOpRun() throws { try Self.explore(CrashScenarios.noOp) }
    @Test func atomicNoOp() throws { try Self.explore(CrashScenarios.atomicNoOp) }
    @Test func resumedOneStream() throws { try Self.explore(CrashScenarios.resumedOneStream) }
    @Test func conversionDroppingUsersFile() throws { try Self.explore(CrashScenarios.conversionDroppingUsersFile) }
    @Test func resumedSegmentsIntoAGeneration() throws { try Self.explore(CrashScenarios.resumedSegmentsAtomic) }
    @Test func signedManifestSerial() throws { try Self.explore(CrashScenarios.signedSerial) }
}
