#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorTestSupport

/// Steps of ``SequenceWalk`` about generations and the journal: rollbacks, kills while old
/// generations are pruned, DEST named by a generation it no longer shows, the journal deleted.
extension SequenceWalk {
    /// A conversion refused because the plain DEST holds files mirror did not install that the
    /// version does not list (changed by hand, or only found in place after the journal went):
    /// nothing changed, and the user moves every such file away, as the message asks. True when
    /// `result` is that refusal.
    mutating func conversionRefused(_ step: Int, version: Int, result: ProcessResult) throws -> Bool {
        guard result.signal == nil && result.exitCode == 1 && result.stderr.contains("was not made atomic") else { return false }
        let listed = world.versions[version]
        let files = try disk.files(under: world.fx.dest).files.keys.filter { !$0.hasPrefix(".mirror/") && listed[$0] == nil }
        for path in files { try FileManager.default.removeItem(atPath: world.destPath(path)) }
        tampered.subtract(files)
        note(step, "the conversion was refused; the user moves \(files.sorted()) away, as the run asked", kind: "conversion refused")
        return true
    }

    /// `mirror rollback` between syncs, DEST named any way.
    mutating func rollback(_ step: Int) throws -> [String] {
        let b = spelling()
        let wait = rng.chance(0.3)
        let result = try run(["rollback", "--dest", b.path] + (wait ? ["--wait"] : []), cwd: b.cwd, timeout: 60)
        exits["rollback exit \(result.exitCode)", default: 0] += 1
        note(step, "rollback --dest \(b.label)\(wait ? " --wait" : "") → exit \(result.exitCode): " + firstLines(result), kind: "rollback")
        return try rollbackCheck(result, label: b.label)
    }

    /// Invariant 7 for a finished rollback: exit 0 only after switching DEST to the newest listed
    /// generation before the one it showed, a whole set; exit 1 only when there was none.
    mutating func rollbackCheck(_ result: ProcessResult, label: String) throws -> [String] {
        let gens = disk.generations()
        let shown = disk.shownGeneration
        switch result.exitCode {
        case 0:
            // "DEST: generation 2 (was 3)", the first line (a hold's notice follows it).
            let said = result.stdout.split(separator: "\n").first { $0.contains(": generation ") } ?? ""
            let numbers = said.split(separator: ": generation ").last.map { $0.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) } } ?? []
            guard numbers.count >= 2, let to = numbers.dropLast().last, let from = numbers.last else {
                return ["invariant 7: rollback (DEST as \(label)) exited 0 without saying which generation\n\(result)"]
            }
            var problems: [String] = []
            if shown != to || !(to < from) || gens.contains(where: { $0 > to && $0 < from }) {
                problems.append("invariant 7: rollback said generation \(to) (was \(from)); DEST shows \(String(describing: shown)), store lists \(gens)\n\(result)")
            }
            let exempt = generationExempt[to] ?? []
            if try disk.wholeOf(disk.store + "/g\(to)", versions: world.versions, exempt: exempt).matches.isEmpty {
                problems.append("invariant 7: rollback exited 0 and switched to g\(to), which is no whole set; store \(disk.storeListing())")
            }
            tampered.formUnion(exempt)
            return problems
        case 1:
            if disk.isAtomic, let shown, gens.contains(where: { $0 < shown }) {
                return ["invariant 7: rollback (DEST as \(label)) exited 1 though DEST shows g\(shown) and the store lists \(gens)\n\(result)"]
            }
            return []
        default:
            return ["invariant 7: rollback (DEST as \(label)) exited \(result.exitCode)\n\(result)"]
        }
    }

    /// An atomic sync killed (`MIRROR_CRASH_AT=prune-mid-removal`) once it has switched DEST and
    /// renamed an old generation out of the list, before its files are gone.
    mutating func pruneKill(_ step: Int) throws -> [String] {
        var plan = planSync(interrupted: true, deleting: false)
        if let at = plan.flags.firstIndex(of: "--keep") { plan.flags.removeSubrange(at...at + 1) }
        let keep = rng.inRange(1...3)
        plan.flags += ["--keep", String(keep)]
        plan.args = ["sync", world.manifestPath(plan.version), "--dest", plan.dest.path] + plan.flags
        let result = try run(plan.args, cwd: plan.dest.cwd, environment: ["MIRROR_CRASH_AT": "prune-mid-removal"], timeout: 120)
        let left = disk.storeListing().filter { $0.hasPrefix(".pruning-") }
        var problems = try check(step, plan, result, how: "MIRROR_CRASH_AT=prune-mid-removal" + (left.isEmpty ? "" : " (left \(left))"), kind: "prune-kill")
        if result.signal == SIGKILL {
            counts["prune-killed", default: 0] += 1
            // The switch came before the pruning: DEST shows the run's version, whole.
            problems += try world.mismatches(of: plan.version).map { "\($0)\n  after a kill while pruning" }
            tampered.subtract(world.versions[plan.version].keys)
        }
        return problems
    }

    /// A sync that names, instead of DEST, a path in its store that is not the set DEST shows (an
    /// older generation, one pruned or not yet made, `building`, the store itself): refused, and
    /// nothing changes.
    mutating func staleSpelling(_ step: Int) throws -> [String] {
        guard let shown = disk.shownGeneration else { return try sync(step, .complete) }
        let gens = disk.generations()
        var names = gens.filter { $0 != shown }.map { "g\($0)" } + [""]
        if FileManager.default.fileExists(atPath: disk.store + "/building") { names.append("building") }
        // A generation pruned or not made yet, and a folder inside a kept one: refused as well.
        names.append("g\((gens.first ?? 1) > 1 ? (gens.first ?? 2) - 1 : (gens.last ?? shown) + 3)")
        if let older = gens.last(where: { $0 != shown }) { names.append("g\(older)/sub") }
        let name = rng.pick(names)
        let path = name.isEmpty ? disk.store : disk.store + "/" + name
        let fingerprint = disk.fingerprint()
        let version = rng.below(SequenceWorld.versionCount)
        let result = try run(["sync", world.manifestPath(version), "--dest", path] + (rng.chance(0.5) ? ["--atomic"] : []), timeout: 60)
        exits["stale-name exit \(result.exitCode)", default: 0] += 1
        note(step, "sync v\(version) --dest DEST.generations/\(name) (DEST shows g\(shown)) → exit \(result.exitCode): " + firstLines(result), kind: "stale-name")
        var problems: [String] = []
        if result.exitCode == 0 || result.exitCode == 75 || result.signal != nil {
            problems.append("a sync naming DEST.generations/\(name), not the set DEST shows (g\(shown)), was not refused\n\(result)")
        }
        let after = disk.fingerprint()
        if after != fingerprint {
            problems.append("a refused sync naming DEST.generations/\(name) changed: \(Set(after).symmetricDifference(fingerprint).sorted().prefix(12))")
        }
        return problems
    }

    // MARK: - The journal

    /// Deletes the journal by hand (each state folder's): mirror must start over from what is on
    /// disk, hashing, and never trust a file it cannot vouch for.
    mutating func deleteJournal(_ step: Int) throws {
        var gone: [String] = []
        for folder in [world.destPath(".mirror"), disk.store + "/.mirror"] where FileManager.default.fileExists(atPath: folder + "/journal") {
            try FileManager.default.removeItem(atPath: folder + "/journal")
            gone.append(folder == disk.store + "/.mirror" ? "DEST.generations/.mirror/journal" : ".mirror/journal")
        }
        note(step, gone.isEmpty ? "journal: none to delete" : "journal deleted by hand: \(gone)", kind: "journal-delete")
        markMaybeFound()
    }

    /// Every file now present may later be known only as found in place.
    mutating func markMaybeFound() {
        for path in world.allPaths {
            var st = stat()
            if lstat(world.destPath(path), &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG { maybeFound[path] = UInt64(st.st_ino) }
        }
    }

    /// Forgets files replaced since (another inode at the path: mirror installed it).
    mutating func refreshFound() {
        maybeFound = maybeFound.filter { isMaybeFound($0.key) }
    }

    /// A folder with no file at any depth (left when the test deleted the files in it): not known
    /// to be mirror's, so it blocks a turn as the docs say.
    func holdsNoFile(_ path: String) -> Bool {
        var st = stat()
        guard lstat(world.destPath(path), &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return false }
        return (FileManager.default.enumerator(atPath: world.destPath(path))?.allObjects as? [String] ?? []).allSatisfy { name in
            var inner = stat()
            return lstat(world.destPath(path) + "/" + name, &inner) == 0 && (inner.st_mode & S_IFMT) == S_IFDIR
        }
    }

    /// A file (or a folder holding one) that the journal has no verified record of with its inode,
    /// or only one of a file found in place: a kill between an install and its record (a turn's
    /// rename into a new folder included) leaves mirror's own file unknown to it, as the docs allow.
    func holdsUnrecorded(_ path: String) -> Bool {
        let text = (try? String(contentsOfFile: stateFolder + "/journal", encoding: .utf8)) ?? ""
        let root = world.destPath(path)
        var files: [String] = FileDamage.size(of: root) != nil ? [path] : []
        for name in (FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? []) where FileDamage.size(of: root + "/" + name) != nil {
            files.append(path + "/" + name)
        }
        return files.contains { file in
            var st = stat()
            guard lstat(world.destPath(file), &st) == 0 else { return false }
            let own = text.split(separator: "\n").last { line in
                line.contains(" verified ") && line.split(separator: " ").contains { $0.hasPrefix("path=") && String($0.dropFirst(5)).removingPercentEncoding == file }
            }
            return own.map { !$0.contains(" ino=\(st.st_ino) ") || $0.contains("found=1") } ?? true
        }
    }

    func isMaybeFound(_ path: String) -> Bool {
        var st = stat()
        return lstat(world.destPath(path), &st) == 0 && maybeFound[path] == UInt64(st.st_ino)
    }
}
