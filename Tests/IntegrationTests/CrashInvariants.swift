#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorCore
import MirrorTestSupport

/// The invariants ``CrashExplorer`` checks on each state (docs/journal.md, "Power loss, as the
/// tests model it"), those of ``SequenceTests`` for states a power cut leaves.
extension CrashExplorer {
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
                  let id = model.node(inode: ino, before: writer(of: record.offset)) else { continue }
            for (name, entry) in state.tree.entries where entry == .file(id) && name.hasSuffix("/" + path) {
                let bytes = state.tree.nodes[id]?.bytes ?? []
                if TestData.sha256(of: bytes) != sha {
                    problems.append("the journal's verified record of \(path) vouches for inode \(ino), which \(name) holds with \(bytes.count) bytes of another content")
                }
            }
        }
        for (path, record) in latest.partial {
            guard let ino = record.fields["ino"].flatMap(UInt64.init), let sha = record.fields["sha256"],
                  let id = model.node(inode: ino, before: writer(of: record.offset)),
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
               let id = model.node(inode: ino, before: writer(of: record.offset)),
               shownOrBuilding(state.tree, world: world).contains(where: { state.tree.entries[$0 + "/" + path] == .file(id) }) {
                continue
            }
            var durable: Int64 = 0
            if let record = latest.partial[path], record.fields["sha256"] == sha, let ino = record.fields["ino"].flatMap(UInt64.init),
               let id = model.node(inode: ino, before: writer(of: record.offset)),
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
