#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorTestSupport

/// The invariants of ``OptionWalk`` after each sync, and over the generations.
extension OptionWalk {
    /// The set a run of `run` must leave (or publish): the selected listed paths with the
    /// version's bytes, and at left-out paths what `before` held there (for an atomic DEST unless
    /// `--delete-excluded`; for a plain one, always, but `--delete-excluded` may remove it).
    func expected(_ run: OptionRun, before: [String: OptionWorld.Look]) -> (selected: [String: OptionWorld.Spec], carried: [String: OptionWorld.Look]) {
        let selects = world.filters[run.filter].selects
        var selected: [String: OptionWorld.Spec] = [:]
        for (path, spec) in world.versions[run.version] where selects(path) { selected[path] = spec }
        var carried: [String: OptionWorld.Look] = [:]
        if !(atomic && run.deleting == .excluded) {
            for (path, look) in before where !selects(path) { carried[path] = look }
        }
        return (selected, carried)
    }

    /// Whether `look` is `spec`: its bytes, and the mode and time the manifest gives.
    static func matches(_ look: OptionWorld.Look?, _ spec: OptionWorld.Spec) -> String? {
        guard let look else { return "missing" }
        if look.sha256 != spec.sha256 { return "other bytes (\(look.sha256.prefix(8)), want \(spec.sha256.prefix(8)))" }
        if let mode = spec.mode, look.mode != mode { return "mode \(String(look.mode, radix: 8)), want \(String(mode, radix: 8))" }
        if let mtime = spec.mtime, look.mtime != mtime { return "mtime \(look.mtime), want \(mtime)" }
        return nil
    }

    mutating func checkSync(_ step: Int, _ run: OptionRun, before: Snapshot, result: ProcessResult, how: String) throws -> [String] {
        let outcome = result.signal.map { "signal \($0)" } ?? "exit \(result.exitCode)"
        let filter = world.filters[run.filter].label
        note(step, "sync v\(run.version) [\(filter)] \(run.args.dropFirst(4).joined(separator: " ")) \(how) → \(outcome)"
             + (result.exitCode == 0 || result.signal != nil ? "" : ": " + (result.stderr + result.stdout).split(separator: "\n").prefix(2).joined(separator: " | ")),
             kind: run.dryRun ? "dry-run" : "sync")
        let context = "\(run.args.joined(separator: " ")) \(how) → \(outcome)\n\(result)"
        var problems: [String] = []
        if result.signal == nil && ![0, 1, 65, 75].contains(result.exitCode) { problems.append("unexpected exit code: \(context)") }
        problems += outputProblems(run, result, context: context)
        let now = try Snapshot(self)
        // A --trust run past DEST's lock records its serial, dry runs aside (docs/signing.md).
        if run.trust == .right, !run.dryRun, result.signal == nil, [0, 1].contains(result.exitCode), let serial = run.serial {
            world.surelyAccepted = max(world.surelyAccepted, serial)
        }
        // A manifest older than one DEST accepted is refused and changes nothing.
        if run.trust == .rollback {
            counts["rollback refused", default: 0] += 1
            if result.signal == nil && result.exitCode != 65 && !(how == "(deadline)" && result.exitCode == 75) {
                problems.append("a manifest older than the serial DEST accepted was not refused (exit 65): \(context)")
            } else if result.signal == nil && result.exitCode == 65 && !result.stderr.contains("is older than serial") {
                problems.append("a rollback was refused for another reason: \(context)")
            }
            if now.fingerprint != before.fingerprint {
                problems.append("invariant 4: a refused rollback changed DEST: "
                                + "\(Set(now.fingerprint).symmetricDifference(before.fingerprint).sorted().prefix(8))\n\(context)")
            }
            return problems
        }
        // A dry run and a manifest whose signature does not verify change nothing.
        if run.dryRun || run.trust == .wrongSignature {
            if run.trust == .wrongSignature && result.signal == nil && result.exitCode != 65 {
                problems.append("a manifest with another's signature was not refused (exit 65): \(context)")
            }
            if now.fingerprint != before.fingerprint {
                problems.append("invariant 4: \(run.dryRun ? "a dry run" : "a refused signature") changed DEST: "
                                + "\(Set(now.fingerprint).symmetricDifference(before.fingerprint).sorted().prefix(8))\n\(context)")
            }
            return problems
        }
        // A first atomic run on a plain DEST that holds a file mirror did not install is refused.
        if atomic && before.plain && result.stderr.contains("was not made atomic") {
            counts["conversion refused", default: 0] += 1
            if !userFile && tampered.isEmpty && nested == nil { problems.append("a conversion was refused with no file of the user's in DEST: \(context)") }
            if nested != nil && !result.stderr.contains(OptionWorld.nestedPath) { problems.append("a refused conversion did not name the nested DEST: \(context)") }
            if now.fingerprint != before.fingerprint { problems.append("invariant 4: a refused conversion changed DEST\n\(context)") }
            // As the message asks: the user moves them away.
            try? FileManager.default.removeItem(atPath: world.destPath(OptionWorld.userPath))
            for path in tampered { try? FileManager.default.removeItem(atPath: world.destPath(path)) }
            if nested != nil { TemporaryDirectory.removeTree(world.destPath(OptionWorld.nestedPath)) }
            userFile = false
            tampered = []
            nested = nil
            note(step, "the user moves their files away, as the run asked", kind: "unblock")
            return problems
        }
        // A run, even one killed or stopped, may have replaced a file changed by hand with a
        // version's bytes: mirror installed that file, so it is no longer the user's.
        for path in tampered where now.files[path].map({ world.digests[path]?.contains($0.sha256) == true }) == true {
            tampered.remove(path)
        }
        // A user's file goes only with --delete-unlisted, where the filter selects its path (any
        // run: a killed one may have got as far as its deletions).
        if userFile && before.plain && now.files[OptionWorld.userPath] == nil {
            if run.deleting == .unlisted && world.filters[run.filter].selects(OptionWorld.userPath) {
                userFile = false
            } else {
                problems.append("invariant 2: the user's \(OptionWorld.userPath) was deleted\n\(context)")
            }
        }
        if result.signal == nil && result.exitCode == 0 {
            if atomic && heldAgainst.contains(run.args[1]) && before.shown != nil {
                counts["held", default: 0] += 1
                if now.shown != before.shown { problems.append("invariant 5: a held DEST switched from g\(before.shown!) to g\(now.shown.map(String.init) ?? "none")\n\(context)") }
                return problems
            }
            heldAgainst = []
            problems += atomic ? checkAtomic(run, before: before, now: now, context: context)
                               : checkPlain(run, before: before, now: now, context: context)
            if problems.isEmpty { tampered.subtract(world.versions[run.version].keys.filter(world.filters[run.filter].selects)) }
        } else if atomic && !heldAgainst.isEmpty && !heldAgainst.contains(run.args[1]) {
            // A sync of another manifest releases the hold as it starts (docs/cli.md, "A rollback
            // holds"), before anything can stop it: one that then fails, or is killed, may have
            // released it. What the hold holds against now is what it says.
            heldAgainst = Set(try heldManifests())
        }
        return problems
    }

    /// Invariant 2 on a plain DEST after exit 0.
    func checkPlain(_ run: OptionRun, before: Snapshot, now: Snapshot, context: String) -> [String] {
        var problems: [String] = []
        let selects = world.filters[run.filter].selects
        let listed = world.versions[run.version]
        for path in OptionWorld.paths {
            let was = before.files[path], is_ = now.files[path]
            if selects(path), let spec = listed[path] {
                if let wrong = Self.matches(is_, spec) { problems.append("invariant 2: \(path) of v\(run.version): \(wrong)") }
            } else if !selects(path) {
                let mayGo = run.deleting == .excluded && !tampered.contains(path)
                if is_ != was && !(mayGo && is_ == nil) { problems.append("invariant 2: \(path), left out by the filter, changed: \(String(describing: was)) → \(String(describing: is_))") }
            } else {
                // --delete-unlisted deletes whatever is there; --delete only what mirror installed.
                let mayGo = run.deleting == .unlisted || (run.deleting != .none && !tampered.contains(path))
                if is_ != was && !(mayGo && is_ == nil) { problems.append("invariant 2: \(path), not listed, changed: \(String(describing: was)) → \(String(describing: is_))") }
            }
        }
        let known = Set(OptionWorld.paths + [OptionWorld.userPath])
        let strays = now.files.keys.filter { !known.contains($0) && !(nested != nil && $0.hasPrefix(OptionWorld.nestedPath + "/")) }
        if !strays.isEmpty { problems.append("invariant 2: files no one put there: \(strays.sorted())") }
        return problems.map { $0 + "\n  after " + context }
    }

    /// Invariant 3 on an atomic DEST after exit 0: DEST shows the selected set plus the carried files.
    func checkAtomic(_ run: OptionRun, before: Snapshot, now: Snapshot, context: String) -> [String] {
        var problems: [String] = []
        guard !now.plain else { return ["an atomic run exited 0 and DEST is no symlink\n\(context)"] }
        let (selected, carried) = expected(run, before: before.plain ? [:] : before.files)
        for (path, spec) in selected {
            if let wrong = Self.matches(now.files[path], spec) { problems.append("invariant 3: \(path) of v\(run.version): \(wrong)") }
        }
        for (path, look) in carried where now.files[path]?.sha256 != look.sha256 {
            problems.append("invariant 3: \(path), left out, is not the set's before: \(String(describing: now.files[path])) want \(look)")
        }
        let extra = Set(now.files.keys).subtracting(selected.keys).subtracting(carried.keys)
        if !extra.isEmpty && !before.plain { problems.append("invariant 3: the set DEST shows holds what no manifest selects: \(extra.sorted())") }
        return problems.map { $0 + "\n  after " + context }
    }

    /// Invariant 6: what `--json`, the metrics file and the log file say.
    func outputProblems(_ run: OptionRun, _ result: ProcessResult, context: String) -> [String] {
        guard result.signal == nil else { return [] }
        var problems: [String] = []
        if run.json, (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any] == nil {
            problems.append("invariant 6: --json printed no JSON object: \(context)")
        }
        if run.quiet && !result.stdout.isEmpty && !run.dryRun { problems.append("invariant 6: --quiet printed on standard output: \(context)") }
        if let metrics = run.metricsFile, !run.dryRun {
            let text = (try? String(contentsOfFile: metrics, encoding: .utf8)) ?? ""
            let samples = (try? PrometheusText.parse(text)) ?? [:]
            if PrometheusText.value(samples, "mirror_last_run_exit_code") != Double(result.exitCode) {
                problems.append("invariant 6: the metrics file does not say exit \(result.exitCode): \(text.prefix(300))\n\(context)")
            }
        }
        return problems
    }

    /// Invariant 2's nested DEST: exactly the files its own last sync left, whatever ran since.
    func nestedStaysWhole() throws -> [String] {
        guard let nested else { return [] }
        let now = try OptionWorld.tree(world.destPath(OptionWorld.nestedPath)).filter { !$0.key.hasPrefix(".mirror/") }
        guard now != nested else { return [] }
        let changed = Set(now.keys).union(nested.keys).filter { now[$0] != nested[$0] }.sorted()
        return ["invariant 2: the nested DEST \(OptionWorld.nestedPath) changed at \(changed) (a run of the outer DEST is the only thing that ran)"]
    }

    /// Invariant 1: every listed path holds nothing or some version's bytes.
    func strayBytes() throws -> [String] {
        var problems: [String] = []
        for path in OptionWorld.paths where !tampered.contains(path) {
            guard let look = try OptionWorld.look(world.destPath(path)), !damagedInodes.contains(look.inode) else { continue }
            if !(world.digests[path] ?? []).contains(look.sha256) { problems.append("invariant 1: \(path) holds bytes of no version") }
        }
        return problems
    }

    /// Invariant 3's second half: a generation, once listed, never changes; a new one is one
    /// manifest's selected set plus carried files (checked by the run that made it, here only
    /// recorded).
    mutating func checkGenerations() throws -> [String] {
        var problems: [String] = []
        let names = (try? FileManager.default.contentsOfDirectory(atPath: store)) ?? []
        for name in names where name.hasPrefix("g") && name.dropFirst().allSatisfy(\.isNumber) && name.count > 1 {
            guard let n = Int(name.dropFirst()) else { continue }
            let files = try OptionWorld.tree(store + "/" + name)
            if let recorded = generations[n] {
                if recorded != files {
                    let changed = Set(recorded.keys).union(files.keys).filter { recorded[$0] != files[$0] }.sorted()
                    problems.append("invariant 3: published generation g\(n) changed at \(changed): "
                                    + changed.map { "\($0): \(String(describing: recorded[$0])) → \(String(describing: files[$0]))" }.joined(separator: "; "))
                }
            } else {
                generations[n] = files
            }
        }
        return problems
    }
}
