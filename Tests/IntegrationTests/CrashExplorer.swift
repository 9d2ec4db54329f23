#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorCore
import MirrorTestSupport

/// One crash-state scenario's world: a served folder behind nginx (``SyncFixture``), DEST at
/// `disk/dest` so that everything a run may change (DEST, `dest.generations` beside it) is under
/// `disk/`, and what the versions of each path are.
final class CrashWorld {
    let fx: SyncFixture
    let disk: String
    let dest: String
    /// Every version's whole set (path to sha256), oldest first; the last is the manifest's now.
    var versions: [[String: String]] = []
    /// Sizes and bytes by sha256, for the checks of partial records.
    var sizes: [String: Int64] = [:]
    private var bytesCache: [String: [UInt8]] = [:]
    private var served: [String: String] = [:]
    var atomic = false
    /// Options of every sync (the traced one and those after the crash).
    var syncOptions: [String] = []

    init(limitRate: String? = nil) throws {
        fx = try SyncFixture(nginx: .init(limitRate: limitRate))
        disk = fx.dir.path("disk")
        dest = disk + "/dest"
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
    }

    var target: [String: String] { versions.last ?? [:] }
    var store: String { dest + ".generations" }
    var stateFolder: String { atomic || FileManager.default.fileExists(atPath: store + "/.mirror") ? store + "/.mirror" : dest + "/.mirror" }

    /// Serves `files` (path to size and seed) as the manifest's new version.
    func publish(_ files: [(path: String, size: Int64, seed: UInt64)]) throws {
        keepBytesOfCurrentVersion()
        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        var version: [String: String] = [:]
        for f in files {
            let sha = try fx.addFile(f.path, size: f.size, seed: f.seed)
            version[f.path] = sha
            sizes[sha] = f.size
            served[sha] = fx.www + "/" + f.path
            bytesCache[sha] = nil
        }
        try fx.writeManifest()
        versions.append(version)
    }

    /// Serves `files` (path to bytes) as the manifest's new version, the manifest written by
    /// `mirror manifest create` with `publisher` options (chunk indexes).
    func publishCreated(_ files: [String: [UInt8]], publisher: [String]) throws {
        var version: [String: String] = [:]
        for (path, bytes) in files {
            let full = fx.www + "/" + path
            try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: full))
            let sha = TestData.sha256(of: bytes)
            version[path] = sha
            sizes[sha] = Int64(bytes.count)
            bytesCache[sha] = bytes
        }
        let created = try Mirror.run(["manifest", "create", fx.www, "--base-url", fx.server.baseURL, "-o", fx.manifestPath] + publisher, timeout: 120)
        guard created.exitCode == 0 else { throw CrashTraceError("manifest create exited \(created.exitCode): \(created.stderr)") }
        versions.append(version)
    }

    /// Keeps a version's bytes readable after the server moves on (for the partial-record checks).
    func bytes(of sha: String) -> [UInt8]? {
        if let cached = bytesCache[sha] { return cached }
        guard let path = served[sha], let data = FileManager.default.contents(atPath: path) else { return nil }
        let bytes = [UInt8](data)
        guard TestData.sha256(of: bytes) == sha else { return nil }
        bytesCache[sha] = bytes
        return bytes
    }

    func keepBytesOfCurrentVersion() { for sha in target.values { _ = bytes(of: sha) } }

    func sync(_ extra: [String] = [], environment: [String: String] = [:]) throws -> ProcessResult {
        try Mirror.run(["sync", fx.manifestPath, "--dest", dest] + syncOptions + extra, environment: environment, timeout: 120)
    }

    func run(_ args: [String], environment: [String: String] = [:]) throws -> ProcessResult {
        try Mirror.run(args, environment: environment, timeout: 120)
    }
}

/// A scenario: what leads up to the recorded command, the command, and the commands run on each
/// state a power cut during it can leave.
struct CrashScenario: Sendable {
    let name: String
    /// Sets the world up and runs what comes before the recorded command (not recorded).
    let prepare: @Sendable (CrashWorld) throws -> Void
    /// The recorded command's arguments, and the exit codes it may end with.
    let recorded: @Sendable (CrashWorld) -> [String]
    var recordedExits: Set<Int32> = [0]
    /// nginx's rate per connection (a run to interrupt), and the recorded run's environment.
    var limitRate: String? = nil
    var environment: [String: String] = [:]
    /// After the next sync on a state: also `mirror rollback` (a rollback scenario).
    var rollbackAfter = false
    /// States that found a defect, kept as regression cases and checked before the drawn ones:
    /// a crash just before the last call that matches, everything before it durable.
    var regressions: [Regression] = []

    struct Regression: Sendable {
        let name: String
        let before: @Sendable (TraceOp) -> Bool
    }
}

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
        while explored < states && attempts < states * 20 {
            attempts += 1
            index += 1
            // Each state's choices come from its own generator, so that one state replays alone.
            var choice = SeededRandom(seed: seed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15)
            if let only, index != only { continue }
            let state = Self.draw(model, &choice)
            let fingerprint = state.tree.fingerprint
            if !seen.insert(fingerprint).inserted { duplicates += 1; continue }
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
            _ = rng.next()
        }
    }

    /// A crash point, how many metadata changes after the last commit survive, and each unsynced
    /// write's fate, all from `rng`.
    static func draw(_ model: CrashModel, _ rng: inout SeededRandom) -> CrashModel.State {
        let n = model.ops.count
        // A third of the states end at a commit (nothing unsynced is left to choose), the rest anywhere.
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

    /// No file at a manifest path holds bytes of no version (in DEST, and in every generation).
    func wrongBytes(_ tree: ModelTree, world: CrashWorld) -> [String] {
        var allowed: [String: Set<String>] = [:]
        for v in world.versions { for (p, sha) in v { allowed[p, default: []].insert(sha) } }
        var problems: [String] = []
        var roots = [world.dest]
        for path in tree.entries.keys where path.hasPrefix(world.store + "/g") && !path.dropFirst(world.store.count + 1).contains("/") {
            roots.append(path)
        }
        for root in roots {
            for (p, shas) in allowed {
                guard case .file(let id) = tree.entries[root + "/" + p], let node = tree.nodes[id] else { continue }
                let sha = TestData.sha256(of: node.bytes)
                if !shas.contains(sha) {
                    problems.append("\(root)/\(p) holds \(node.bytes.count) bytes of no version (sha256 \(sha.prefix(12)))")
                }
            }
        }
        if world.atomic || tree.entries[world.dest].map({ if case .symlink = $0 { return true } else { return false } }) == true {
            problems += wholeShown(tree, world: world)
        }
        return problems
    }

    /// An atomic DEST shows one version's whole set: its symlink names a generation that holds
    /// exactly one version's files.
    func wholeShown(_ tree: ModelTree, world: CrashWorld) -> [String] {
        guard case .symlink(let target) = tree.entries[world.dest] else {
            if case .folder = tree.entries[world.dest] { return [] }  // not converted yet
            return ["DEST \(world.dest) is neither a folder nor a generation's symlink"]
        }
        let shown = world.disk + "/" + target
        var files: [String: String] = [:]
        for (path, entry) in tree.entries where path.hasPrefix(shown + "/") {
            let relative = String(path.dropFirst(shown.count + 1))
            if relative.hasPrefix(".mirror") { continue }
            if case .file(let id) = entry, let node = tree.nodes[id] { files[relative] = TestData.sha256(of: node.bytes) }
        }
        if world.versions.contains(where: { $0 == files }) { return [] }
        return ["DEST shows \(target), which is no version's whole set: " + files.keys.sorted().map { "\($0)=\(files[$0]!.prefix(8))" }.joined(separator: " ")]
    }

    /// Rule 1: every record the crash left in the journal's valid part is true of the state. A
    /// `verified` record's inode, wherever the state names it at the record's path, holds the
    /// record's bytes; a `partial` record's inode holds the served bytes in its durable ranges.
    func journalClaims(_ state: CrashModel.State, model: CrashModel, world: CrashWorld) -> [String] {
        guard case .file(let journalID) = state.tree.entries[world.stateFolder + "/journal"],
              let journal = state.tree.nodes[journalID] else { return [] }
        let latest = JournalLines(journal.bytes).latest()
        var problems: [String] = []
        func writer(of offset: Int) -> Int {
            state.written[journalID]?.last { Int64(offset) >= $0.offset && Int64(offset) < $0.offset + $0.length }?.seq ?? 0
        }
        for (path, record) in latest.verified {
            guard let ino = record.fields["ino"].flatMap(UInt64.init), let sha = record.fields["sha256"],
                  let id = model.node(inode: ino, before: writer(of: record.offset), in: state.tree) else { continue }
            for (name, entry) in state.tree.entries where entry == .file(id) && name.hasSuffix("/" + path) {
                let bytes = state.tree.nodes[id]?.bytes ?? []
                if TestData.sha256(of: bytes) != sha {
                    problems.append("the journal's verified record of \(path) vouches for inode \(ino), which \(name) holds with \(bytes.count) bytes of another content")
                }
            }
        }
        for (path, record) in latest.partial {
            guard let ino = record.fields["ino"].flatMap(UInt64.init), let sha = record.fields["sha256"],
                  let id = model.node(inode: ino, before: writer(of: record.offset), in: state.tree),
                  state.tree.entries.contains(where: { $0.value == .file(id) }),
                  let served = world.bytes(of: sha) else { continue }
            let bytes = state.tree.nodes[id]?.bytes ?? []
            for range in Self.durableRanges(record) {
                let end = min(range.upperBound, served.count)
                guard range.lowerBound < end else { continue }
                if bytes.count < end || Array(bytes[range.lowerBound..<end]) != Array(served[range.lowerBound..<end]) {
                    problems.append("the journal's partial record of \(path) calls bytes \(range.lowerBound)..<\(end) durable, and the partial file (\(bytes.count) bytes) does not hold the served bytes there")
                    break
                }
            }
        }
        return problems
    }

    static func durableRanges(_ record: JournalLines.Record) -> [Range<Int>] {
        if let segs = record.fields["segs"] {
            return segs.split(separator: ",").compactMap { seg in
                let parts = seg.split(separator: ":").compactMap { Int($0) }
                return parts.count == 3 ? parts[0]..<(parts[0] + parts[2]) : nil
            }
        }
        return [0..<(record.fields["bytes"].flatMap(Int.init) ?? 0)]
    }

    /// What the next sync may fetch at most: the manifest's bytes, less each file the journal
    /// vouches for (a `verified` record whose inode the state holds at the path) and each partial
    /// file's durable bytes (a `partial` record whose file the state holds).
    func fetchBound(_ state: CrashModel.State, model: CrashModel, world: CrashWorld) -> Int64 {
        var bound: Int64 = 0
        var lines = JournalLines([])
        var journalID = -1
        if case .file(let id) = state.tree.entries[world.stateFolder + "/journal"], let node = state.tree.nodes[id] {
            lines = JournalLines(node.bytes)
            journalID = id
        }
        let latest = lines.latest()
        func writer(of offset: Int) -> Int {
            state.written[journalID]?.last { Int64(offset) >= $0.offset && Int64(offset) < $0.offset + $0.length }?.seq ?? 0
        }
        for (path, sha) in world.target {
            let size = world.sizes[sha] ?? 0
            if let record = latest.verified[path], record.fields["sha256"] == sha, let ino = record.fields["ino"].flatMap(UInt64.init),
               let id = model.node(inode: ino, before: writer(of: record.offset), in: state.tree),
               shownOrBuilding(state.tree, world: world).contains(where: { state.tree.entries[$0 + "/" + path] == .file(id) }) {
                continue
            }
            var durable: Int64 = 0
            if let record = latest.partial[path], record.fields["sha256"] == sha, let ino = record.fields["ino"].flatMap(UInt64.init),
               let id = model.node(inode: ino, before: writer(of: record.offset), in: state.tree),
               state.tree.entries.contains(where: { $0.value == .file(id) }) {
                durable = Int64(Self.durableRanges(record).reduce(0) { $0 + $1.count })
            }
            bound += size - min(size, durable)
        }
        return bound
    }

    /// Where the next run looks for a file at its path: the folder DEST names (an atomic DEST's
    /// shown generation) and the generation being built. A copy elsewhere (an older generation) is
    /// found by the index of local copies only through its record's `stat`, which a state written
    /// anew does not keep (new inodes), so it does not count.
    func shownOrBuilding(_ tree: ModelTree, world: CrashWorld) -> [String] {
        var roots = [world.dest, world.store + "/building"]
        if case .symlink(let target) = tree.entries[world.dest] { roots[0] = world.disk + "/" + target }
        return roots
    }

    /// DEST holds exactly `version` (an atomic DEST: its shown generation is exactly it).
    func shows(_ version: [String: String], world: CrashWorld, after: String) throws -> [String] {
        var problems: [String] = []
        for (path, sha) in version {
            let got = try? TestData.sha256(ofFileAt: world.dest + "/" + path)
            if got != sha { problems.append("after \(after), \(path) holds \(got.map { String($0.prefix(12)) } ?? "nothing"), not \(sha.prefix(12))") }
        }
        if world.atomic { problems += try wholeGenerations(world: world, after: after) }
        return problems
    }

    /// Every generation the store lists is one version's whole set, and DEST shows one.
    func wholeGenerations(world: CrashWorld, after: String) throws -> [String] {
        let tree = try ModelTree.read(world.disk)
        var problems = wholeShown(tree, world: world).map { "after \(after): " + $0 }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: world.store)) ?? []
        for name in names where name.hasPrefix("g") && name.dropFirst().allSatisfy(\.isNumber) {
            let root = world.store + "/" + name
            var files: [String: String] = [:]
            for (path, entry) in tree.entries where path.hasPrefix(root + "/") {
                if case .file(let id) = entry, let node = tree.nodes[id] { files[String(path.dropFirst(root.count + 1))] = TestData.sha256(of: node.bytes) }
            }
            if !world.versions.contains(where: { $0 == files }) {
                problems.append("after \(after): \(name) is no version's whole set: " + files.keys.sorted().joined(separator: " "))
            }
        }
        return problems
    }
}
