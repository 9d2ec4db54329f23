#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorTestSupport

/// A random walk that draws every `sync` option (``OptionRun/draw(_:world:version:atomic:waiting:)``)
/// and every command (`status`, `verify`, `rollback`, `rollback --release`; `manifest create` and
/// `manifest sign` make its world), on a plain DEST, an atomic one, or one converted midway, with
/// kills, deadlines, a user's file, another DEST inside DEST, bytes changed in place behind the
/// journal's back and a waiter stopped by a signal. The invariants (``OptionWalk/checkSync(_:_:before:result:how:)`` and
/// ``OptionWalk/checkGenerations()``):
///
/// 1. every listed path holds nothing or some version's bytes (but where the test changed it);
/// 2. after exit 0, every selected listed path holds the manifest's bytes, mode and mtime; a path
///    the filter leaves out is untouched (or, with `--delete-excluded`, gone); a user's file stays
///    unless `--delete-unlisted` selects it; a nested DEST stays whole, whatever the options;
///    nothing else appears;
/// 3. an atomic DEST shows exactly one manifest's selected set plus the files the set shown before
///    held at left-out paths (none with `--delete-excluded`), and every generation, once listed,
///    never changes (bytes, mode, time, inode);
/// 4. a dry run, a refused conversion (a user's file, or a nested DEST even with
///    `--delete-unlisted`), a run whose signature does not verify and, with `--trust`, a
///    manifest whose serial is below one DEST surely accepted (exit 65) change nothing; every
///    `--trust` run that is not one of those is a new publish with the next serial;
/// 5. what `verify` finds corrupt, the next `sync` repairs; a waiter stopped by SIGTERM exits 75;
///    a sync of the manifest a rollback held against changes nothing until `rollback --release`;
/// 6. `--json` is one JSON object, the metrics file names the exit code, the log ends the run.
struct OptionWalk {
    enum Mode: String { case plain, atomic, convert }

    let seed: UInt64
    var rng: SeededRandom
    let world: OptionWorld
    let mode: Mode
    let convertAt: Int
    var converted = false
    var current = 0
    var userFile = false
    /// Another DEST inside a plain DEST (``nestedDestination(_:)``): its files when its last sync
    /// ended, which no run of the outer DEST may change (docs/cli.md: nested destinations stay whole).
    var nested: [String: OptionWorld.Look]?
    /// Paths whose bytes the test changed by hand (a plain DEST), until a run puts them back.
    var tampered: Set<String> = []
    /// Files the test changed in place behind the journal's back (``verifyThenSync(_:)``): in an
    /// atomic DEST every generation that shares the inode shows the change, so a rollback may
    /// show it again; such an inode is not judged by invariant 1.
    var damagedInodes: Set<UInt64> = []
    /// Every generation seen, as it was when first listed, and the version whose run made it.
    var generations: [Int: [String: OptionWorld.Look]] = [:]
    var builtBy: [Int: Int] = [:]
    /// After a rollback: the manifest files (by path) a sync of which changes nothing until the
    /// hold is released. By file, not version: a hold names manifests by their bytes, and a new
    /// signed publish of a version (another serial) is another manifest, which releases it.
    var heldAgainst: Set<String> = []
    var log: [String] = []
    var counts: [String: Int] = [:]
    var atomicSteps = 0
    var filteredSteps = 0
    /// Every option the walk passed, for the coverage line.
    var optionsUsed: Set<String> = []

    var atomic: Bool { mode == .atomic || converted }
    var store: String { world.dest + ".generations" }

    init(seed: UInt64, steps: Int, mode forced: Mode?) throws {
        self.seed = seed
        rng = SeededRandom(seed: seed)
        world = try OptionWorld(rng: &rng)
        let drawn = [Mode.plain, .atomic, .convert][rng.below(3)]
        mode = forced ?? drawn
        convertAt = max(2, rng.inRange(steps / 4 ... max(steps / 4, steps / 2)))
    }

    mutating func note(_ step: Int, _ text: String, kind: String) {
        log.append("\(step). \(text)")
        counts[kind, default: 0] += 1
    }

    /// The generation DEST's symlink shows, or nil.
    var shown: Int? {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: world.dest),
              let last = target.split(separator: "/").last, last.hasPrefix("g") else { return nil }
        return Int(last.dropFirst())
    }

    var isSymlink: Bool {
        var st = stat()
        return lstat(world.dest, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK
    }

    /// One random step; returns the invariants it broke.
    mutating func step(_ step: Int) throws -> [String] {
        if atomic { atomicSteps += 1 }
        // A file changed by hand that holds a version's bytes again was put back by a run (any
        // run: killed, stopped, or the sync after `verify`): it is mirror's, no longer the user's.
        for path in tampered {
            guard let look = try OptionWorld.look(world.destPath(path)), world.digests[path]?.contains(look.sha256) == true else { continue }
            tampered.remove(path)
        }
        if mode == .convert && !converted && step >= convertAt {
            converted = true
            note(step, "the walk converts DEST: --atomic from now on", kind: "convert")
        }
        var problems: [String]
        switch rng.weighted([40, 8, 10, 6, 6, 5, 6, 5]) {
        case 0: problems = try sync(step, .complete)
        case 1: problems = try sync(step, .deadline(rng.inRange(100...1200)))
        case 2: problems = try sync(step, .kill(rng.inRange(20...1200)))
        case 3: problems = try statusStep(step)
        case 4: problems = try verifyThenSync(step)
        case 5:
            if atomic { problems = try rollbackStep(step) } else if rng.chance(0.35) { problems = try nestedDestination(step) } else { try plantUserFile(step); problems = [] }
        case 6: problems = try waiterStopped(step)
        default:
            if atomic { problems = try releaseStep(step) } else { try tamper(step); problems = [] }
        }
        return problems + (try checkGenerations()) + (try strayBytes()) + (try nestedStaysWhole())
    }

    // MARK: - Runs

    enum Ending { case complete, deadline(Int), kill(Int) }

    /// The environment of every command: the variable `--auth-header-env` names.
    static let environment = ["MIRROR_WALK_AUTH": "Bearer lab-walk"]

    mutating func drawRun(waiting: Bool = false) throws -> OptionRun {
        if rng.chance(0.4) { current = rng.below(OptionWorld.versionCount) }
        let run = OptionRun.draw(&rng, world: world, version: current, atomic: atomic, waiting: waiting)
        if run.trust == .right, let serial = run.serial { try world.publishSigned(current, serial: serial) }
        optionsUsed.formUnion(run.args.filter { $0.hasPrefix("-") }.map { $0.split(separator: "=").first.map(String.init) ?? $0 })
        if run.filter != 0 { filteredSteps += 1 }
        return run
    }

    mutating func sync(_ step: Int, _ ending: Ending) throws -> [String] {
        var run = try drawRun()
        let before = try Snapshot(self)
        let result: ProcessResult
        let how: String
        switch ending {
        case .complete:
            how = "to the end"
            result = try Mirror.run(run.args, environment: Self.environment, timeout: 180)
        case .deadline(let ms):
            how = "(deadline)"
            run.args += ["--deadline", "\(ms)ms"]
            result = try Mirror.run(run.args, environment: Self.environment, timeout: 180)
        case .kill(let ms):
            how = "SIGKILL at \(ms)ms"
            let child = try Mirror.start(run.args, environment: Self.environment)
            // Not a wait for a state: the kill at a random moment is what this step draws.
            usleep(useconds_t(ms * 1000))
            child.signal(SIGKILL)
            result = try child.wait(timeout: 30)
        }
        return try checkSync(step, run, before: before, result: result, how: how)
    }

    /// What DEST was before a run: its files (the shown set's, for an atomic DEST), the generation
    /// shown, whether DEST was a plain folder, and a fingerprint of everything.
    struct Snapshot {
        var files: [String: OptionWorld.Look]
        var shown: Int?
        var plain: Bool
        var fingerprint: [String]

        init(_ walk: OptionWalk) throws {
            files = try OptionWorld.tree(walk.world.dest)
            shown = walk.shown
            plain = !walk.isSymlink
            fingerprint = OptionWalk.fingerprint(walk.world.dest, walk.store)
        }
    }

    /// Every path under DEST and its store with type, mode, size, times, inode and links.
    static func fingerprint(_ roots: String...) -> [String] {
        var lines: [String] = []
        var pending = roots
        while let path = pending.popLast() {
            var st = stat()
            guard lstat(path, &st) == 0 else { continue }
            // The lock file is written by any run that takes the lock, refused or not.
            if path.hasSuffix("/.mirror/lock") { continue }
            lines.append("\(path) \(String(st.st_mode, radix: 8)) \(st.st_size) \(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec) "
                         + "\(st.st_ctim.tv_sec).\(st.st_ctim.tv_nsec) \(st.st_ino) \(st.st_nlink)")
            if (st.st_mode & S_IFMT) == S_IFDIR {
                pending += ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).map { path + "/" + $0 }
            }
        }
        return lines.sorted()
    }
}
