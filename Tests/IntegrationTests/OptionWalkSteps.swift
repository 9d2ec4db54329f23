#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorTestSupport

/// The steps of ``OptionWalk`` other than one sync: `status`, `verify` then `sync`, `rollback`
/// and `rollback --release`, a waiter stopped by SIGTERM, a user's file and a file changed by hand.
extension OptionWalk {
    /// `status --json` of the version last synced: exit 0, one JSON object, no sync running.
    mutating func statusStep(_ step: Int) throws -> [String] {
        let result = try Mirror.run(["status", world.manifestPath(current), "--dest", world.dest, "--json"] + world.filters[rng.below(world.filters.count)].args,
                                    environment: Self.environment, timeout: 60)
        note(step, "status v\(current) → exit \(result.exitCode)", kind: "status")
        guard result.exitCode == 0, let object = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any] else {
            return ["status exited \(result.exitCode) or printed no JSON object\n\(result)"]
        }
        if object["sync_running"] as? Bool != false { return ["status says a sync runs with none running\n\(result)"] }
        return []
    }

    /// Bytes changed in place with the size and time put back (a sync's `stat` compare trusts the
    /// file); `verify` must name it, and the next sync of the same version put it right.
    mutating func verifyThenSync(_ step: Int) throws -> [String] {
        // A held DEST keeps what it shows, damage included, until the hold goes.
        guard !(atomic && !heldAgainst.isEmpty) else {
            note(step, "verify then sync: DEST is held", kind: "verify-skip")
            return []
        }
        let candidates = OptionWorld.paths.filter { path in
            world.versions[current][path].map { $0.size > 1 } == true && !tampered.contains(path)
                && ((try? OptionWorld.look(world.destPath(path)))??.sha256 == world.versions[current][path]?.sha256)
        }
        guard !candidates.isEmpty else {
            note(step, "verify then sync: no file of v\(current) in place", kind: "verify-skip")
            return []
        }
        let path = rng.pick(candidates)
        let file = world.destPath(path)
        var st = stat()
        guard stat(file, &st) == 0 else { return [] }
        let at = Int64(rng.below(Int(st.st_size)))
        let held = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        try FileDamage.overwrite(file, at: at, with: [held[Int(at)] ^ 0xff])
        damagedInodes.insert(UInt64(st.st_ino))
        var times = [st.st_atim, st.st_mtim]
        guard utimensat(AT_FDCWD, file, &times, 0) == 0 else { throw HarnessError.posix("utimensat \(file)") }
        // The test's own change: every generation sharing the file shows it (hard links).
        generations = [:]
        // Every entry, whatever the last sync selected (verify alone counts what it selected).
        let verify = try Mirror.run(["verify", world.manifestPath(current), "--dest", world.dest, "--include", "**"],
                                    environment: Self.environment, timeout: 120)
        note(step, "damage \(path) in place (size and mtime kept), verify v\(current) → exit \(verify.exitCode)", kind: "verify")
        var problems: [String] = []
        if verify.exitCode != 1 || !verify.stderr.contains(path) {
            problems.append("invariant 5: verify did not name \(path), changed in place\n\(verify)")
        }
        let sync = try Mirror.run(["sync", world.manifestPath(current), "--dest", world.dest] + (atomic ? ["--atomic", "--max-delete", "100%"] : []),
                                  environment: Self.environment, timeout: 180)
        note(step, "sync v\(current) after verify → exit \(sync.exitCode)", kind: "sync-after-verify")
        if sync.exitCode == 0, atomic && heldAgainst.contains(world.manifestPath(current)) {
            return problems
        }
        if sync.exitCode == 0, (try OptionWorld.look(file))?.sha256 != world.versions[current][path]?.sha256 {
            problems.append("invariant 5: the sync after verify left \(path) corrupt\n\(sync)")
        }
        if sync.exitCode == 0 { heldAgainst = [] }
        return problems
    }

    /// `rollback`: exit 0 when DEST switched to an older generation, which a sync of the
    /// manifest rolled back from then keeps (``heldAgainst``, read from `status --json`).
    mutating func rollbackStep(_ step: Int) throws -> [String] {
        let before = shown
        let result = try Mirror.run(["rollback", "--dest", world.dest], environment: Self.environment, timeout: 60)
        note(step, "rollback → exit \(result.exitCode) (g\(before.map(String.init) ?? "-") → g\(shown.map(String.init) ?? "-"))", kind: "rollback")
        guard result.exitCode == 0 else {
            return [1, 73, 75].contains(result.exitCode) && shown == before ? [] : ["rollback exited \(result.exitCode) and DEST moved\n\(result)"]
        }
        var problems: [String] = []
        if shown == before { problems.append("rollback exited 0 and DEST did not switch\n\(result)") }
        heldAgainst = Set(try heldManifests())
        return problems
    }

    /// `rollback --release`: the hold goes; the next sync of any version syncs.
    mutating func releaseStep(_ step: Int) throws -> [String] {
        let result = try Mirror.run(["rollback", "--dest", world.dest, "--release"], environment: Self.environment, timeout: 60)
        note(step, "rollback --release → exit \(result.exitCode)", kind: "release")
        if result.exitCode == 0 { heldAgainst = [] }
        return [0, 1].contains(result.exitCode) ? [] : ["rollback --release exited \(result.exitCode)\n\(result)"]
    }

    /// The manifest files the hold names (`status --json`, `generations.hold.manifests`): the
    /// versions' own and the signed publishes'.
    func heldManifests() throws -> [String] {
        let result = try Mirror.run(["status", world.manifestPath(current), "--dest", world.dest, "--json"], timeout: 60)
        guard let object = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any],
              let hold = (object["generations"] as? [String: Any])?["hold"] as? [String: Any],
              let manifests = hold["manifests"] as? [String] else { return [] }
        let files = (0..<OptionWorld.versionCount).map(world.manifestPath) + (0..<world.serialsDrawn).map { world.signedPath($0 + 1) }
        return files.filter { (try? TestData.sha256(ofFileAt: $0)).map(manifests.contains) == true }
    }

    /// A sync holds DEST (stopped with SIGSTOP once its pid is in the lock file); a second one
    /// with `--wait` waits, and SIGTERM ends the wait: exit 75, nothing done. Then the first goes on.
    mutating func waiterStopped(_ step: Int) throws -> [String] {
        let runA = try drawRun()
        let before = try Snapshot(self)
        let a = try Mirror.start(runA.args, environment: Self.environment)
        defer { if a.isRunning { a.signal(SIGKILL); a.signal(SIGCONT) } }
        let locks = [world.destPath(".mirror/lock"), store + "/.mirror/lock"]
        func named(_ pid: pid_t) -> Bool {
            locks.contains { (try? String(contentsOfFile: $0, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) == String(pid) }
        }
        try Wait.until("sync A's pid is in the lock file", timeout: 30) { named(a.pid) || !a.isRunning }
        a.signal(SIGSTOP)
        guard a.isRunning && named(a.pid) && !runA.dryRun else {
            a.signal(SIGCONT)
            return try checkSync(step, runA, before: before, result: try a.wait(timeout: 180), how: "to the end (A ended before a waiter came)")
        }
        let b = try Mirror.start(["sync", world.manifestPath(current), "--dest", world.dest, "--wait"] + (atomic ? ["--atomic"] : []),
                                 environment: Self.environment)
        defer { if b.isRunning { b.signal(SIGKILL) } }
        func waits(_ pid: pid_t) -> Bool {
            ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).contains { fd in
                ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) ?? "").hasSuffix("/.mirror/lock")
            }
        }
        try Wait.until("B waits on the lock", timeout: 30) { waits(b.pid) || !b.isRunning }
        b.signal(SIGTERM)
        let resultB = try b.wait(timeout: 30)
        note(step, "a waiter beside sync A, SIGTERM → \(resultB.signal.map { "signal \($0)" } ?? "exit \(resultB.exitCode)")", kind: "waiter")
        var problems: [String] = []
        if resultB.signal != nil || resultB.exitCode != 75 { problems.append("invariant 5: a waiter ended by SIGTERM did not exit 75\n\(resultB)") }
        a.signal(SIGCONT)
        problems += try checkSync(step, runA, before: before, result: try a.wait(timeout: 180), how: "stopped while a waiter came, then continued")
        return problems
    }

    /// A file of the user's, at a path no manifest lists (a plain DEST).
    mutating func plantUserFile(_ step: Int) throws {
        try FileManager.default.createDirectory(atPath: world.destPath("notes"), withIntermediateDirectories: true)
        try Data("the user's notes".utf8).write(to: URL(fileURLWithPath: world.destPath(OptionWorld.userPath)))
        userFile = true
        note(step, "the user writes \(OptionWorld.userPath)", kind: "user-file")
    }

    /// Another DEST inside the plain DEST (made, or synced again to another version): its own
    /// sync ends exit 0, and from then on no run of the outer DEST changes it
    /// (``nestedStaysWhole()``); a conversion is refused until the user moves it away.
    mutating func nestedDestination(_ step: Int) throws -> [String] {
        let version = rng.below(OptionWorld.versionCount)
        let inner = world.destPath(OptionWorld.nestedPath)
        let result = try Mirror.run(["sync", world.manifestPath(version), "--dest", inner, "--delete"], environment: Self.environment, timeout: 180)
        note(step, "a nested DEST at \(OptionWorld.nestedPath) syncs v\(version) → exit \(result.exitCode)", kind: "nested")
        guard result.exitCode == 0 else { return ["a sync of the nested DEST exited \(result.exitCode)\n\(result)"] }
        let files = try OptionWorld.tree(inner)
        var problems: [String] = []
        for (path, spec) in world.versions[version] {
            if let wrong = Self.matches(files[path], spec) { problems.append("the nested DEST's \(path) of v\(version): \(wrong)") }
        }
        nested = files
        return problems
    }

    /// A listed file changed by hand (a plain DEST): it is the user's until a run puts it back.
    mutating func tamper(_ step: Int) throws {
        let present = OptionWorld.paths.filter { FileDamage.size(of: world.destPath($0)).map { $0 > 0 } == true }
        guard !present.isEmpty else { return }
        let path = rng.pick(present)
        try FileDamage.append(world.destPath(path), Array("edited by hand".utf8))
        tampered.insert(path)
        note(step, "the user edits \(path)", kind: "tamper")
    }
}
