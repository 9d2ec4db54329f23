#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorCore
import MirrorTestSupport

/// The crash-state explorer (docs/journal.md, "Power loss, as the tests model it"): records one
/// run of a scenario through `MIRROR_TEST_TRACE`, builds states a power cut can leave on the
/// model (``CrashModel``), writes each into `disk/`, runs the next commands and checks the
/// invariants of the sequence tests on each. Seeded; a failure prints the seed, the state and how
/// to replay it.
struct CrashExplorer {
    let scenario: CrashScenario
    let seed: UInt64
    let states: Int
    var only: Int?
    /// What the run saw, for the report.
    var explored = 0
    var duplicates = 0
    var statesByRegion: [String: Int] = [:]
    var problems: [String] = []
    var traceLength = 0

    /// Draws in a row that find no new state, after which the space counts as exhausted.
    static let exhaustedAfter = 1500

    init(_ scenario: CrashScenario, seed: UInt64, states: Int, only: Int? = nil) {
        self.scenario = scenario
        self.seed = seed
        self.states = states
        self.only = only
    }

    mutating func run() throws {
        let world = try CrashWorld(limitRate: scenario.limitRate)
        try scenario.prepare(world)
        world.keepBytesOfCurrentVersion()
        let before = try ModelTree.read(world.disk)
        let tracePath = world.fx.dir.path("trace")
        let recorded = try world.run(scenario.recorded(world), environment: scenario.environment.merging(["MIRROR_TEST_TRACE": tracePath]) { $1 })
        guard scenario.recordedExits.contains(recorded.exitCode) else {
            throw CrashTraceError("the recorded run of \(scenario.name) exited \(recorded.exitCode): \(recorded.stderr)")
        }
        let ops = try TraceOp.parse([UInt8](Data(contentsOf: URL(fileURLWithPath: tracePath))))
        traceLength = ops.count
        let model = CrashModel(root: world.disk, before: before, ops: ops)
        var rng = SeededRandom(seed: seed)
        var seen: Set<Int> = []
        for regression in scenario.regressions where only == nil {
            guard let at = ops.last(where: regression.before) else {
                problems.append("crash-state explorer: scenario \(scenario.name): the regression state '\(regression.name)' names no call of the recorded run")
                continue
            }
            let state = model.state(cut: at.seq, metadataKept: Int.max, fate: { _ in .kept }, rng: &rng)
            seen.insert(state.tree.fingerprint)
            explored += 1
            statesByRegion["regression", default: 0] += 1
            let found = try check(state, model: model, world: world)
            if !found.isEmpty {
                problems.append("crash-state explorer: scenario \(scenario.name), regression state '\(regression.name)': \(state.description)\n"
                    + found.map { "  - " + $0 }.joined(separator: "\n"))
            }
        }
        var index = 0
        var attempts = 0
        var sinceNew = 0
        // A run that draws only states already seen has found all this trace has (a small one,
        // or a run whose writes are synced before anything names them): it stops there.
        while explored < states && attempts < states * 20 && sinceNew < Self.exhaustedAfter {
            attempts += 1
            sinceNew += 1
            index += 1
            // Each state's choices come from its own generator, so that one state replays alone.
            var choice = SeededRandom(seed: seed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15)
            if let only, index != only { continue }
            let state = Self.draw(model, &choice)
            let fingerprint = state.tree.fingerprint
            if !seen.insert(fingerprint).inserted { duplicates += 1; continue }
            sinceNew = 0
            explored += 1
            statesByRegion[Self.region(state, model), default: 0] += 1
            let found = try check(state, model: model, world: world)
            if !found.isEmpty {
                problems.append("""
                    crash-state explorer: scenario \(scenario.name), seed \(seed), state \(index): \(state.description)
                    \(found.map { "  - " + $0 }.joined(separator: "\n"))
                    replay this state: MIRROR_CRASH_STATE_SEED=\(seed) MIRROR_CRASH_STATE_ONLY=\(index) swift test --filter 'CrashStateTests/\(scenario.name)' \
                    (the recorded run's calls can differ from this one's; MIRROR_KEEP_TEST_DIRS=1 keeps its trace and the state)
                    """)
                if problems.count >= 3 { break }
            }
        }
    }

    /// A crash point, how many metadata changes after the last commit survive, and each unsynced
    /// write's fate, all from `rng`.
    static func draw(_ model: CrashModel, _ rng: inout SeededRandom) -> CrashModel.State {
        let n = model.ops.count
        // A fifth of the states end just after a commit (little unsynced is left to choose), the rest anywhere.
        var cut = rng.inRange(0...n)
        let commitPoints = (0..<n).filter { model.commits[$0] }
        if rng.chance(0.2), !commitPoints.isEmpty { cut = commitPoints[rng.below(commitPoints.count)] + 1 }
        let lastCommit = (0..<cut).last { model.commits[$0] } ?? -1
        let pending = model.ops[(lastCommit + 1)..<cut].filter(\.isMetadata).count
        let kept = rng.chance(0.3) ? pending : rng.inRange(0...pending)
        var fates: [Int: CrashModel.Fate] = [:]
        for op in model.ops[0..<cut] where op.kind == "write" {
            fates[op.seq] = [.kept, .dropped, .torn][rng.below(3)]
        }
        return model.state(cut: cut, metadataKept: kept, fate: { fates[$0] ?? .kept }, rng: &rng)
    }

    static func region(_ state: CrashModel.State, _ model: CrashModel) -> String {
        state.description.contains("after the last call") ? "end" : "mid-run"
    }

    // MARK: - The checks of one state

    func check(_ state: CrashModel.State, model: CrashModel, world: CrashWorld) throws -> [String] {
        var problems = wrongBytes(state.tree, world: world)
        problems += journalClaims(state, model: model, world: world)
        let placed = try state.tree.write(to: world.disk)
        problems += placed.map { "the model could not place " + $0 }
        if !problems.isEmpty { return problems }
        let promised = fetchBound(state, model: model, world: world)

        // status reads, and changes nothing.
        let status = try world.run(["status", world.fx.manifestPath, "--dest", world.dest])
        if ![0, 1].contains(status.exitCode) { problems.append("status on the crash state exited \(status.exitCode): \(status.stderr)") }

        if scenario.rollbackAfter {
            // A rollback's hold may or may not have been made durable: the next sync leaves DEST
            // on a whole version either way; releasing the hold then lets the manifest's in.
            let held = try world.sync()
            if held.exitCode != 0 { return problems + ["the next sync exited \(held.exitCode): \(held.stderr.suffix(2000))"] }
            problems += try wholeGenerations(world: world, after: "the next sync")
            let release = try world.run(["rollback", "--dest", world.dest, "--release"])
            if ![0, 1].contains(release.exitCode) { problems.append("rollback --release exited \(release.exitCode): \(release.stderr)") }
        }
        // The next sync: exit 0 against a correct server, exactly the manifest's version, and no
        // more fetched than the journal's durable claims leave to fetch.
        let next = try world.sync(["--json"])
        if next.exitCode != 0 {
            return problems + ["the next sync exited \(next.exitCode): \(next.stderr.suffix(2000))"]
        }
        problems += try shows(world.target, world: world, after: "the next sync")
        if let document = try? JSONDecoder().decode(SyncDocument.self, from: Data(next.stdout.utf8)),
           document.bytesTransferred > promised {
            problems.append("the next sync fetched \(document.bytesTransferred) bytes, where the journal's durable records left \(promised) to fetch")
        }
        let verify = try world.run(["verify", world.fx.manifestPath, "--dest", world.dest])
        if verify.exitCode != 0 { problems.append("verify after the next sync exited \(verify.exitCode): \(verify.stdout.suffix(1500)) \(verify.stderr.suffix(500))") }

        // Converged: a second sync finds everything verified and fetches nothing.
        let again = try world.sync(["--json"])
        if again.exitCode != 0 {
            problems.append("a second sync exited \(again.exitCode): \(again.stderr.suffix(1500))")
        } else if let document = try? JSONDecoder().decode(SyncDocument.self, from: Data(again.stdout.utf8)),
                  document.bytesTransferred != 0 || document.files.downloaded + document.files.replaced != 0 {
            problems.append("a second sync still fetched \(document.bytesTransferred) bytes (\(document.files.downloaded) downloaded, \(document.files.replaced) replaced)")
        }
        if scenario.rollbackAfter {
            let rollback = try world.run(["rollback", "--dest", world.dest])
            if ![0, 1].contains(rollback.exitCode) { problems.append("a rollback after the syncs exited \(rollback.exitCode): \(rollback.stderr)") }
            problems += try wholeGenerations(world: world, after: "a rollback after the syncs")
        }
        return problems
    }
}
