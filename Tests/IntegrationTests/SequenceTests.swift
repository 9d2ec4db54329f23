import Foundation
import Testing
import MirrorTestSupport

/// The promise "a killed run, a dead network or a changed manifest costs time, never correctness"
/// tested as a whole: a seeded random walk that switches between three manifest
/// versions of the same paths and, between runs, kills, stops at deadlines, damages the journal
/// and the partials, tampers with installed files and changes what the server sends. The fault
/// suites test one manifest at a time; the defects this walk finds need a sequence.
///
/// After every step it checks three invariants:
/// 1. every path of any version holds nothing or exactly the bytes of some version of that path
///    (a path the test tampered with is exempt until a run listing it exits 0);
/// 2. a run that exits 0 leaves exactly its version, and `mirror verify` agrees;
/// 3. a correct server (no served file of that version changed) never yields exit 1.
/// Exit codes other than 0, 1 and 75 fail any run that was not killed.
///
/// Runs draw `--delete` now and then, and a third of the walks sync with `--atomic` throughout;
/// two more invariants cover them:
/// 4. `--delete` never removes a file the test changed by hand, and a run that did not exit 0
///    (and was not killed) removes nothing;
/// 5. an atomic DEST shows, after every step, all of one version and nothing else (paths the test
///    tampered with aside), and after a run that exits 0, exactly that run's version.
///
/// The walk also runs a second command while a sync holds DEST (``SequenceWalk/concurrent(_:)``),
/// kills a run while it prunes old generations and while it converts a plain DEST to `--atomic`
/// (a third of the walks start plain and convert at some step), deletes the journal by hand,
/// rolls an atomic DEST back, and names DEST in every way that names it (`DEST/.`, a symlink to
/// it, a relative path, its current generation). More invariants:
/// 6. one lock: while a sync holds DEST, a second sync or rollback without `--wait` exits 75 and
///    changes nothing, whatever it calls DEST; with `--wait` it ends only after the first;
/// 7. every generation the store lists is one version's whole set, and `rollback` exits 0 only
///    when it switched DEST to one;
/// 8. nothing beside DEST and its store changes (a canary folder and a symlink planted there);
/// 9. `status` beside a running sync names it, and never calls a file that was `done` before
///    and still holds its bytes `unverified`.
///
/// `MIRROR_SEQ_SEED` replays a walk (the choices are the seed's; the moments a kill or a deadline
/// lands are the machine's, so a replay is close, not exact); `MIRROR_SEQ_STEPS` runs more steps;
/// `MIRROR_SEQ_LOG=1` prints every step; `MIRROR_SEQ_MODE=plain|atomic|convert` picks the kind of walk.
@Suite(.serialized) struct SequenceTests {
    static let defaultSteps = 180

    @Test func aRandomSequenceOfVersionsKillsAndDamageNeverLeavesWrongBytes() throws {
        let env = ProcessInfo.processInfo.environment
        let seed = env["MIRROR_SEQ_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64.max)
        let steps = env["MIRROR_SEQ_STEPS"].flatMap { Int($0) } ?? Self.defaultSteps
        var walk = try SequenceWalk(seed: seed, steps: steps)
        let started = Date()
        let (done, failed) = WalkSteps.run(steps) { try walk.step($0) }
        if let failed { Issue.record("\(walk.report(step: failed.step, of: steps, failed.problems))") }
        if env["MIRROR_SEQ_LOG"] == "1" { print(walk.log.joined(separator: "\n")) }
        print("sequence: seed \(seed) (\(walk.mode)), \(done) of \(steps) steps (\(walk.atomicSteps) atomic) in \(Int(Date().timeIntervalSince(started))) s; "
            + "steps \(walk.counts.sorted { $0.key < $1.key }); exits \(walk.exits.sorted { $0.key < $1.key })")
    }
}

/// The state of one walk: the world, the version last synced, the paths the test tampered with,
/// and a log of every step for the failure message.
struct SequenceWalk {
    let seed: UInt64
    var rng: SeededRandom
    let world: SequenceWorld
    let disk: SequenceDisk
    var current = 0
    var previous = 0
    var tampered: Set<String> = []
    /// Paths changed by hand while generation N existed (its files are hard links shared with DEST).
    var generationExempt: [Int: Set<String>] = [:]
    /// Files present when the journal was damaged or deleted, by inode: a later run may only have
    /// found them in place (`found=1`), and a found file in the way of a turning path blocks it.
    var maybeFound: [String: UInt64] = [:]
    /// Files a plain run put where a folder stood (a turn), by inode.
    var turnedIn: [String: UInt64] = [:]
    var log: [String] = []
    var counts: [String: Int] = [:]
    var exits: [String: Int] = [:]
    var atomicSteps = 0

    enum Mode: String { case plain, atomic, convert }
    /// A plain walk syncs without `--atomic` throughout, an atomic one with it throughout, and a
    /// converting one turns its plain DEST atomic at step `convertAt`.
    let mode: Mode
    let convertAt: Int
    /// `--atomic` has been passed (once passed, always: the DEST stays atomic).
    var converted = false
    /// The plain DEST's files just before the conversion, and those of them no version lists
    /// beside the version whose whole set it holds: files a plain run without `--delete` left.
    /// The conversion keeps such a set as g1 as it was (docs/cli.md, "Atomic destinations"),
    /// leftovers and all; g1 is then whole of that version with the leftovers beside it.
    var plainBeforeConversion: (files: [String: String], leftovers: Set<String>)?
    var atomic: Bool { mode == .atomic || converted }

    enum Ending { case complete, deadline(milliseconds: Int), kill(milliseconds: Int) }

    init(seed: UInt64, steps: Int) throws {
        self.seed = seed
        rng = SeededRandom(seed: seed)
        // 2 MB/s per connection: a 6 MB file takes 3 s on one stream and under 1 s on four, so
        // kills and deadlines land mid-transfer, and a whole version still takes only seconds.
        world = try SequenceWorld(rng: &rng, limitRate: "2m")
        disk = try SequenceDisk(dest: world.fx.dest)
        let forced = ProcessInfo.processInfo.environment["MIRROR_SEQ_MODE"].flatMap(Mode.init(rawValue:))
        let drawn = [Mode.plain, .atomic, .convert][rng.below(3)]
        mode = forced ?? drawn
        convertAt = max(2, rng.inRange(steps / 5 ... max(steps / 5, steps / 2)))
    }

    /// Where the journal and the partial downloads are: the store's once a conversion began.
    var stateFolder: String {
        FileManager.default.fileExists(atPath: disk.store + "/.mirror") ? disk.store + "/.mirror" : world.destPath(".mirror")
    }

    /// Performs one random step and returns the invariants it broke.
    mutating func step(_ step: Int) throws -> [String] {
        var problems: [String] = []
        if atomic { atomicSteps += 1 }
        refreshFound()
        let restored = try world.restoreServed(dueBy: step)
        if !restored.isEmpty {
            note(step, "restore server " + restored.map { "v\($0.version)/\($0.path)" }.joined(separator: ", "), kind: "server-restore")
            return try world.strayBytes(exempt: tampered)
        }
        if mode == .convert && !converted && step >= convertAt {
            // The conversion: the first --atomic run, killed now and then.
            converted = true
            counts["convert", default: 0] += 1
            if !disk.isAtomic { plainBeforeConversion = try plainSetWithLeftovers() }
            problems += try sync(step, rng.chance(0.5) ? .kill(milliseconds: rng.inRange(20...900)) : .complete)
        } else {
            switch rng.weighted([22, 16, 16, 7, 4, 9, 6, 14, 3, 5, 4, 2]) {
            case 0: problems += try sync(step, .complete)
            case 1: problems += try sync(step, .deadline(milliseconds: rng.inRange(150...1500)))
            case 2: problems += try sync(step, .kill(milliseconds: rng.inRange(30...1200)))
            case 3: try damageJournal(step)
            case 4: try damagePartial(step)
            case 5: try tamper(step)
            case 6:
                if let served = try world.changeServed(version: current, until: step + rng.inRange(1...6), rng: &rng) {
                    note(step, "change server v\(served.version)/\(served.path) (same size, other bytes)", kind: "server-change")
                } else {
                    note(step, "change server: nothing left to change", kind: "server-change")
                }
            case 7: problems += try concurrent(step)
            case 8: try deleteJournal(step)
            case 9: problems += atomic ? try pruneKill(step) : try rollback(step)
            case 10: problems += atomic ? try rollback(step) : try sync(step, .complete)
            default: problems += atomic ? try staleSpelling(step) : try sync(step, .complete)
            }
        }
        problems += try invariants()
        return problems
    }

    /// The plain DEST's files (its state folder left out) and, when they hold one version's whole
    /// set, the other files beside it.
    func plainSetWithLeftovers() throws -> (files: [String: String], leftovers: Set<String>) {
        let files = try disk.files(under: world.fx.dest).files.filter { !$0.key.hasPrefix(".mirror/") }
        for version in world.versions
        where version.allSatisfy({ tampered.contains($0.key) || files[$0.key] == $0.value.sha256 }) {
            return (files, Set(files.keys).subtracting(version.keys))
        }
        return (files, [])
    }

    /// The invariants every step ends with.
    mutating func invariants() throws -> [String] {
        // The set the conversion kept as g1 (exactly the plain DEST's files): its leftovers are
        // not judged as part of a version's set.
        if let before = plainBeforeConversion, disk.generations().contains(1) {
            plainBeforeConversion = nil
            if try disk.files(under: disk.store + "/g1").files == before.files {
                generationExempt[1, default: []].formUnion(before.leftovers)
            }
        }
        var problems = try world.strayBytes(exempt: tampered)
        if disk.isAtomic { problems += try world.mixedSet(exempt: tampered.union(generationExempt[disk.shownGeneration ?? -1] ?? [])) }
        problems += try disk.wholeGenerations(versions: world.versions, exempt: generationExempt)
        problems += try disk.outsideChanges()
        return problems
    }

    // MARK: - Runs

    /// One sync's choices, made before it starts.
    struct SyncPlan {
        var version: Int
        var flags: [String]
        var deleting: Bool
        var unlisted: [String]
        var correctServer: Bool
        var dest: Spelling
        var args: [String]
        /// The turning paths (the file of a pair) that were folders when the run began.
        var foldersBefore: [String] = []
    }

    /// Draws a sync: which version (switching now and then, as `sync` did), its options and how
    /// it names DEST. `deleting` allows `--delete` (a plain walk's run only).
    mutating func planSync(interrupted: Bool, deleting allowDelete: Bool = true) -> SyncPlan {
        // Interrupted runs mostly switch versions (a run of the version in place has nothing to
        // do, so nothing to interrupt), and so a partial of one version meets runs of others.
        // A switch goes back to the version before more often than not: A, B, A is the shape of
        // the sequences that meet a partial of the other version.
        if rng.chance(interrupted ? 0.85 : 0.35) {
            let other = rng.chance(0.6) && previous != current ? previous
                : (current + 1 + rng.below(SequenceWorld.versionCount - 1)) % SequenceWorld.versionCount
            (previous, current) = (current, other)
        }
        let version = current
        var flags: [String] = []
        if rng.chance(0.5) { flags += ["--segments", "4", "--segments-above", "1M"] }
        flags += ["--jobs", String(rng.pick([1, 2, 2, 4, 4, 8, 8, 64]))]
        if rng.chance(0.3) { flags += ["--connections", String(rng.pick([1, 2, 16]))] }
        // Several transfer threads (the default on this machine may be one).
        if rng.chance(0.4) { flags += ["--transfer-threads", String(rng.pick([2, 3]))] }
        let deleting = allowDelete && !atomic && rng.chance(0.35)
        if atomic { flags += ["--atomic", "--max-delete", "100%"] + (rng.chance(0.3) ? ["--keep", String(rng.inRange(1...3))] : []) }
        if deleting { flags += ["--delete", "--max-delete", "100%"] }
        let unlisted = world.allPaths.filter { world.versions[version][$0] == nil && FileDamage.size(of: world.destPath($0)) != nil }
        let dest = rng.chance(0.3) ? spelling() : Spelling(path: world.fx.dest, cwd: nil, label: "DEST")
        return SyncPlan(version: version, flags: flags, deleting: deleting, unlisted: unlisted,
                        correctServer: world.serverIsCorrect(for: version), dest: dest,
                        args: ["sync", world.manifestPath(version), "--dest", dest.path] + flags,
                        foldersBefore: SequenceWorld.turns.map(\.file).filter { world.mayBeFolder($0) })
    }

    mutating func sync(_ step: Int, _ ending: Ending) throws -> [String] {
        let interrupted: Bool
        if case .complete = ending { interrupted = false } else { interrupted = true }
        let plan = planSync(interrupted: interrupted)
        let result: ProcessResult
        let how: String
        switch ending {
        case .complete:
            how = "to the end"
            result = try run(plan.args, cwd: plan.dest.cwd, timeout: 120)
        case .deadline(let ms):
            how = "--deadline \(ms)ms"
            result = try run(plan.args + ["--deadline", "\(ms)ms"], cwd: plan.dest.cwd, timeout: 120)
        case .kill(let ms):
            how = "SIGKILL at \(ms)ms"
            let child = try start(plan.args, cwd: plan.dest.cwd)
            // Not a wait for a state: the kill at a random moment is the step under test.
            usleep(useconds_t(ms * 1000))
            child.signal(SIGKILL)
            result = try child.wait(timeout: 30)
        }
        return try check(step, plan, result, how: how)
    }

    /// The invariants of one finished sync. `ranLast`: no other run changed DEST after it, so
    /// a run that exited 0 must have left its version.
    mutating func check(_ step: Int, _ plan: SyncPlan, _ result: ProcessResult, how: String, kind: String = "sync", ranLast: Bool = true) throws -> [String] {
        let version = plan.version
        let outcome = result.signal.map { "signal \($0)" } ?? "exit \(result.exitCode)"
        exits["\(kind) \(outcome)", default: 0] += 1
        if result.stdout.contains("copied from this machine") { counts["reuse", default: 0] += 1 }
        if result.stdout.contains("fetched, the rest copied from") { counts["delta", default: 0] += 1 }
        note(step, "\(kind) v\(version) \(plan.flags.joined(separator: " ")) --dest \(plan.dest.label) \(how)\(plan.correctServer ? "" : " (server changed)") → \(outcome)"
             + (result.exitCode == 0 || result.signal != nil ? "" : ": " + firstLines(result)), kind: kind)

        var problems: [String] = []
        let context = "sync v\(version) --dest \(plan.dest.label) \(how) → \(outcome)\n\(result)"
        if result.signal == nil && ![0, 1, 75].contains(result.exitCode) {
            problems.append("unexpected exit code: \(context)")
        }
        // A run, even one killed or stopped, may have replaced a file changed by hand with its
        // version's bytes: mirror installed that file, so it is no longer the test's.
        for path in tampered where world.versions[version][path].map({ FileDamage.size(of: world.destPath(path)) == $0.size }) == true {
            if try TestData.sha256(ofFileAt: world.destPath(path)) == world.versions[version][path]?.sha256 { tampered.remove(path) }
        }
        for path in plan.foldersBefore where !disk.isAtomic {
            var st = stat()
            if lstat(world.destPath(path), &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG { turnedIn[path] = UInt64(st.st_ino) }
        }
        if plan.deleting {
            let gone = plan.unlisted.filter { FileDamage.size(of: world.destPath($0)) == nil }
            for path in gone where tampered.contains(path) {
                problems.append("invariant 4: --delete removed \(path), which was changed by hand: \(context)")
            }
            // A file of mirror's own in the way of a listed path (a turn) is replaced by any run.
            let listed = world.versions[version].keys
            let deleted = gone.filter { path in !listed.contains { $0.hasPrefix(path + "/") || path.hasPrefix($0 + "/") } }
            if result.signal == nil && result.exitCode != 0 && !deleted.isEmpty {
                problems.append("invariant 4: a run that exited \(result.exitCode) deleted \(deleted): \(context)")
            }
        }
        if try conversionRefused(step, version: version, result: result) { return problems }
        // Last: a blocked turn's blocker is moved away here, after the checks of what the run deleted.
        // A run that another followed (--wait) left DEST to it: what blocked it is gone, not judged.
        if result.signal == nil && result.exitCode == 1 && plan.correctServer && !ranLast && result.stderr.contains("move it away") {
            counts["blocked turn not judged (another run followed)", default: 0] += 1
        } else if result.signal == nil && result.exitCode == 1 && plan.correctServer && !plan.flags.contains("--max-delete")
                    && result.stderr.contains("more than --max-delete") && result.stderr.contains("still holds the previous set")
                    && result.stderr.contains("run again with --atomic --max-delete") {
            // A run without --atomic on an atomic DEST (its waiter, say) switches generations all
            // the same, held to the default 50 %: refused, with DEST as it was (invariants 1 and 7).
            counts["guardrail (no --max-delete on an atomic DEST)", default: 0] += 1
        } else if result.signal == nil && result.exitCode == 1 && plan.correctServer {
            problems += try blockedTurns(step, version: version, result: result, context: context, moveAway: ranLast)
        }
        guard result.exitCode == 0 && ranLast else { return problems }
        // A rollback holds DEST at its generation while the manifest is the one rolled back from:
        // such a run changes nothing, and DEST shows the held set (a whole set: invariant 7).
        if result.stdout.contains(" is held at generation ") {
            counts["held by a rollback", default: 0] += 1
            return problems
        }
        if disk.isAtomic {
            let extra = world.allPaths.filter { world.versions[version][$0] == nil && FileDamage.size(of: world.destPath($0)) != nil }
            if !extra.isEmpty { problems.append("invariant 5: after an atomic run of v\(version) exited 0, DEST still has \(extra): \(context)") }
        } else if atomic {
            problems.append("an --atomic run exited 0 and DEST is still no symlink: \(context)")
        }
        let wrong = try world.mismatches(of: version)
        if !wrong.isEmpty { problems += wrong.map { "\($0)\n  after \(context)" } }
        let verify = try run(["verify", world.manifestPath(version), "--dest", world.fx.dest], timeout: 120)
        if verify.exitCode != 0 {
            problems.append("invariant 2: sync v\(version) exited 0 but `mirror verify` exits \(verify.exitCode)\n\(verify)")
        }
        tampered.subtract(world.versions[version].keys)
        return problems
    }

    /// A run that exits 1 although the server is right: allowed only where a turning path is
    /// blocked by what mirror must not remove (a file changed by hand, or one a run may only have
    /// found in place after the journal was lost). The test then moves the blocker away, as the
    /// message asks; anything else breaks invariant 3.
    private mutating func blockedTurns(_ step: Int, version: Int, result: ProcessResult, context: String, moveAway: Bool) throws -> [String] {
        let text = result.stderr + result.stdout
        guard text.contains("move it away") else { return ["invariant 3: exit 1 with a correct server: \(context)"] }
        var blockers: [String] = []
        for path in world.versions[version].keys {
            let parts = path.split(separator: "/").map(String.init)
            for depth in 1..<max(1, parts.count) {
                let prefix = parts.prefix(depth).joined(separator: "/")
                if FileDamage.size(of: world.destPath(prefix)) != nil { blockers.append(prefix) }
            }
            var st = stat()
            if lstat(world.destPath(path), &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR { blockers.append(path) }
        }
        let excused = blockers.filter { blocker in
            world.allPaths.contains { ($0 == blocker || $0.hasPrefix(blocker + "/")) && (tampered.contains($0) || isMaybeFound($0)) }
                || holdsNoFile(blocker) || holdsUnrecorded(blocker)
        }
        guard !blockers.isEmpty, excused.count == blockers.count else {
            let evidence = blockers.map { blocker -> String in
                var st = stat()
                let shown = lstat(world.destPath(blocker), &st) == 0
                    ? "ino=\(st.st_ino) mtime=\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec) ctime=\(st.st_ctim.tv_sec).\(st.st_ctim.tv_nsec) links=\(st.st_nlink)" : "gone"
                let text = (try? String(contentsOfFile: stateFolder + "/journal", encoding: .utf8)) ?? ""
                let lines = text.split(separator: "\n").filter { $0.contains("path=\(blocker) ") || $0.contains("path=\(blocker)/") }
                return "\(blocker): \(shown); turned in \(turnedIn[blocker].map(String.init) ?? "-"), maybe found \(maybeFound[blocker].map(String.init) ?? "-"); journal:\n    "
                    + lines.suffix(8).joined(separator: "\n    ")
            }
            return ["invariant 3: exit 1 with a correct server, a turning path blocked by mirror's own file (blockers \(blockers), "
                    + "changed by hand or maybe found: \(excused)): \(context)\n" + evidence.joined(separator: "\n")]
        }
        guard moveAway else { return [] }
        for blocker in blockers { try FileManager.default.removeItem(atPath: world.destPath(blocker)) }
        tampered = tampered.filter { path in !blockers.contains { path == $0 || path.hasPrefix($0 + "/") } }
        note(step, "the user moves \(blockers) away, as the run asked", kind: "unblock")
        return []
    }

    func run(_ args: [String], cwd: String? = nil, environment: [String: String] = [:], timeout: Double) throws -> ProcessResult {
        try Mirror.run(args, environment: environment,
                 cwd: cwd, timeout: timeout)
    }

    func start(_ args: [String], cwd: String? = nil, environment: [String: String] = [:]) throws -> ChildProcess {
        try Mirror.start(args, environment: environment, cwd: cwd)
    }

    func firstLines(_ result: ProcessResult) -> String {
        (result.stderr + result.stdout).split(separator: "\n").prefix(2).joined(separator: " | ")
    }

    // MARK: - Log

    mutating func note(_ step: Int, _ text: String, kind: String) {
        log.append("\(step). \(text)")
        counts[kind, default: 0] += 1
    }

    /// The failure message: seed, step, how to replay, what broke, and the steps that led there.
    func report(step: Int, of steps: Int, _ problems: [String]) -> String {
        let versions = world.versions.enumerated().map { v, files in
            "v\(v): " + files.keys.sorted().map { "\($0) \(files[$0]!.size) \(files[$0]!.sha256.prefix(8))" }.joined(separator: ", ")
        }
        return """
            sequence test failed at step \(step) of \(steps), seed \(seed) (a \(mode) walk\(mode == .convert ? ", converting at step \(convertAt)" : ""))
            replay: MIRROR_SEQ_SEED=\(seed) MIRROR_SEQ_STEPS=\(steps) MIRROR_SEQ_MODE=\(mode) swift test --filter SequenceTests
            \(problems.joined(separator: "\n"))
            versions:
            \(versions.joined(separator: "\n"))
            last steps:
            \(log.suffix(40).joined(separator: "\n"))
            """
    }
}
