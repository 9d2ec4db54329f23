#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorTestSupport

/// A folder tree as the crash model sees it: names (files by node, folders, symlinks) and, per
/// node, its inode number in the recorded run, mode and bytes. Hard links are one node.
struct ModelTree {
    enum Entry: Hashable { case file(Int), folder(UInt32), symlink(String) }
    struct Node { var ino: UInt64; var born: Int; var mode: UInt32; var bytes: [UInt8] }

    var entries: [String: Entry] = [:]
    var nodes: [Int: Node] = [:]

    /// Reads the tree under `root` (lstat, nothing followed); `root` itself is not an entry.
    static func read(_ root: String) throws -> ModelTree {
        var tree = ModelTree()
        var byInode: [UInt64: Int] = [:]
        var pending = [root]
        while let folder = pending.popLast() {
            for name in try FileManager.default.contentsOfDirectory(atPath: folder) {
                let path = folder + "/" + name
                var st = stat()
                guard lstat(path, &st) == 0 else { continue }
                switch st.st_mode & S_IFMT {
                case S_IFDIR:
                    tree.entries[path] = .folder(UInt32(st.st_mode & 0o7777))
                    pending.append(path)
                case S_IFLNK:
                    tree.entries[path] = .symlink(try FileManager.default.destinationOfSymbolicLink(atPath: path))
                case S_IFREG:
                    let ino = UInt64(st.st_ino)
                    if let id = byInode[ino] { tree.entries[path] = .file(id); continue }
                    let id = tree.nodes.count
                    byInode[ino] = id
                    let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
                    tree.nodes[id] = Node(ino: ino, born: -1, mode: UInt32(st.st_mode & 0o7777), bytes: bytes)
                    tree.entries[path] = .file(id)
                default: continue
                }
            }
        }
        return tree
    }

    /// Writes the tree under `root`, after removing what is there: folders, then files (a node's
    /// second name a hard link of its first), then symlinks. Returns the entries it could not
    /// place (a name whose folder the state does not have: a fault of the model, reported).
    func write(to root: String) throws -> [String] {
        for name in try FileManager.default.contentsOfDirectory(atPath: root) { TemporaryDirectory.removeTree(root + "/" + name) }
        // Once seen: `dest` still there after the removal (mkdir then failed with EEXIST). Say
        // what was left, so that a recurrence names its cause, and try once more.
        let left = try FileManager.default.contentsOfDirectory(atPath: root)
        if !left.isEmpty {
            let report = left.map { name -> String in
                let inside = (try? FileManager.default.subpathsOfDirectory(atPath: root + "/" + name)) ?? []
                return "\(name) (\(inside.count) names inside: \(inside.prefix(5).joined(separator: ", ")))"
            }.joined(separator: "; ")
            print("crash states: the removal of the last state left \(report); removing again")
            for name in left { TemporaryDirectory.removeTree(root + "/" + name) }
            let still = try FileManager.default.contentsOfDirectory(atPath: root)
            guard still.isEmpty else { throw HarnessError("the last state's tree could not be removed: \(report)") }
        }
        var problems: [String] = []
        var written: [Int: String] = [:]
        let sorted = entries.keys.sorted { a, b in
            let (da, db) = (a.split(separator: "/").count, b.split(separator: "/").count)
            return da != db ? da < db : a < b
        }
        for path in sorted {
            let parent = (path as NSString).deletingLastPathComponent
            if parent != root, case .folder = entries[parent] {} else if parent != root {
                problems.append("\(path): its folder is not in the state"); continue
            }
            switch entries[path] {
            case .folder(let mode):
                guard mkdir(path, 0o700) == 0 else { throw HarnessError.posix("mkdir \(path)") }
                _ = chmod(path, mode_t(mode))
            case .file(let id):
                if let first = written[id] {
                    guard link(first, path) == 0 else { throw HarnessError.posix("link \(path)") }
                    continue
                }
                guard let node = nodes[id] else { problems.append("\(path): node \(id) unknown"); continue }
                let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                guard fd >= 0 else { throw HarnessError.posix("create \(path)") }
                var done = 0
                while done < node.bytes.count {
                    let n = node.bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, node.bytes.count - done) }
                    guard n > 0 else { close(fd); throw HarnessError.posix("write \(path)") }
                    done += n
                }
                _ = fchmod(fd, mode_t(node.mode))
                close(fd)
                written[id] = path
            case .symlink(let target):
                guard symlink(target, path) == 0 else { throw HarnessError.posix("symlink \(path)") }
            case nil: break
            }
        }
        return problems
    }

    /// A fingerprint of the state, to count each distinct state once.
    var fingerprint: Int {
        var h = Hasher()
        for path in entries.keys.sorted() {
            h.combine(path)
            switch entries[path] {
            case .file(let id): h.combine(0); h.combine(id); h.combine(nodes[id]?.bytes ?? []); h.combine(nodes[id]?.mode ?? 0)
            case .folder(let mode): h.combine(1); h.combine(mode)
            case .symlink(let target): h.combine(2); h.combine(target)
            case nil: break
            }
        }
        return h.finalize()
    }

    // MARK: - Names

    /// Moves `from` (and, for a folder, everything beneath it) to `to`, replacing what was there.
    mutating func move(_ from: String, _ to: String) {
        guard let entry = entries[from] else { return }
        removeTree(to)
        entries[from] = nil
        entries[to] = entry
        if case .folder = entry {
            for key in entries.keys where key.hasPrefix(from + "/") {
                entries[to + key.dropFirst(from.count)] = entries.removeValue(forKey: key)
            }
        }
    }

    mutating func exchange(_ a: String, _ b: String) {
        let moved = entries.filter { $0.key == a || $0.key.hasPrefix(a + "/") }
        let other = entries.filter { $0.key == b || $0.key.hasPrefix(b + "/") }
        for key in moved.keys { entries[key] = nil }
        for key in other.keys { entries[key] = nil }
        for (key, value) in moved { entries[b + key.dropFirst(a.count)] = value }
        for (key, value) in other { entries[a + key.dropFirst(b.count)] = value }
    }

    mutating func removeTree(_ path: String) {
        entries[path] = nil
        for key in entries.keys where key.hasPrefix(path + "/") { entries[key] = nil }
    }
}

/// What a power cut can leave of a recorded run, on the model of docs/journal.md ("Power loss, as
/// the tests model it"): ext4 with `data=ordered`, its journal committing metadata in order.
struct CrashModel {
    let root: String
    let before: ModelTree
    let ops: [TraceOp]
    /// Per op: the node it acts on (resolved over the whole run), whether it commits the file
    /// system's journal (every metadata change before it is then durable), and for a write the
    /// first later call that makes its data durable.
    private(set) var node: [Int?]
    private(set) var commits: [Bool]
    private(set) var durableAt: [Int]
    private(set) var nodeCount: Int

    init(root: String, before: ModelTree, ops: [TraceOp]) {
        self.root = root
        self.before = before
        self.ops = ops
        node = Array(repeating: nil, count: ops.count)
        commits = Array(repeating: false, count: ops.count)
        durableAt = Array(repeating: Int.max, count: ops.count)
        nodeCount = (before.nodes.keys.max() ?? -1) + 1
        resolve()
    }

    func inScope(_ path: String?) -> Bool { path.map { $0.hasPrefix(root + "/") } ?? false }

    /// Replays the whole run once: which node each call names (inode numbers are reused, so an
    /// inode means the latest node made with it), which calls commit, and when each write is synced.
    private mutating func resolve() {
        var tree = before
        var byInode: [UInt64: Int] = [:]
        for (id, n) in before.nodes { byInode[n.ino] = id }
        var size: [Int: Int64] = [:]
        var dirty: Set<Int> = []
        var unsynced: [Int: [Int]] = [:]
        for (id, n) in before.nodes { size[id] = Int64(n.bytes.count) }
        for op in ops {
            let i = op.seq
            switch op.kind {
            case "open":
                guard let ino = op.ino else { continue }
                if op["tmpfile"] == "1" {
                    node[i] = nodeCount; nodeCount += 1
                } else {
                    guard let path = op["path"], inScope(path) else { continue }
                    if case .file(let id) = tree.entries[path], tree.nodes[id]?.ino == ino || byInode[ino] == id {
                        node[i] = id
                    } else {
                        node[i] = nodeCount; nodeCount += 1
                        tree.entries[path] = .file(node[i]!)
                    }
                }
                let id = node[i]!
                byInode[ino] = id
                if tree.nodes[id] == nil { tree.nodes[id] = ModelTree.Node(ino: ino, born: i, mode: 0, bytes: []); size[id] = 0 }
                dirty.insert(id)
            case "link":
                guard let to = op["to"], inScope(to) else { continue }
                if let ino = op.ino { node[i] = byInode[ino] } else if let from = op["from"], case .file(let id) = tree.entries[from] { node[i] = id }
                if let id = node[i] { tree.entries[to] = .file(id) }
            case "rename":
                if let from = op["from"], let to = op["to"] { tree.move(from, to) }
            case "exchange":
                if let a = op["from"], let b = op["to"] { tree.exchange(a, b) }
            case "unlink", "rmdir":
                if let path = op["path"] { tree.removeTree(path) }
            case "mkdir":
                if let path = op["path"], inScope(path) { tree.entries[path] = .folder(UInt32(op["mode"] ?? "") ?? 0o755) }
            case "symlink":
                if let path = op["path"], inScope(path) { tree.entries[path] = .symlink(op["target"] ?? "") }
            case "fsync", "syncfs":
                commits[i] = true
                if let ino = op.ino { node[i] = byInode[ino] }
                let synced = op.kind == "syncfs" ? Array(unsynced.keys) : node[i].map { [$0] } ?? []
                for id in synced { for w in unsynced[id] ?? [] { durableAt[w] = i }; unsynced[id] = nil }
                dirty = []
            case "fdatasync":
                guard let ino = op.ino, let id = byInode[ino] else { continue }
                node[i] = id
                // ext4 commits its journal for fdatasync only when the inode's size or blocks
                // changed since it was last synced (ext4_sync_file); an overwrite in place does not.
                if dirty.contains(id) { commits[i] = true; dirty = [] }
                for w in unsynced[id] ?? [] { durableAt[w] = i }
                unsynced[id] = nil
            default:
                guard let ino = op.ino, let id = byInode[ino] else { continue }
                node[i] = id
                if op.kind == "write" {
                    unsynced[id, default: []].append(i)
                    let end = (op.int("off") ?? 0) + Int64(op.payload.count)
                    if end > size[id, default: 0] { size[id] = end; dirty.insert(id) }
                } else if op.kind == "truncate" || op.kind == "allocate" {
                    dirty.insert(id)
                }
            }
        }
    }

    /// What a crash leaves, with the choices that made it.
    struct State {
        var tree: ModelTree
        /// Per node, the writes kept, as (offset, length, op): to tell which call wrote a byte.
        var written: [Int: [(offset: Int64, length: Int64, seq: Int)]]
        var description: String
    }

    enum Fate { case kept, dropped, torn }

    /// The state after a crash just before op `cut` (all ops when `cut == ops.count`): every
    /// metadata change up to the last commit, then the first `metadataKept` of those after it;
    /// every synced write; each unsynced write as `fate` says (torn: a random choice of its 4 KiB
    /// blocks, drawn from `rng`).
    func state(cut: Int, metadataKept: Int, fate: (Int) -> Fate, rng: inout SeededRandom) -> State {
        let lastCommit = (0..<cut).last { commits[$0] } ?? -1
        var afterCommit = 0
        var tree = before
        var written: [Int: [(Int64, Int64, Int)]] = [:]
        var counts = (kept: 0, dropped: 0, torn: 0, metaDropped: 0)
        for op in ops[0..<cut] {
            let i = op.seq
            if op.isMetadata {
                if i > lastCommit {
                    afterCommit += 1
                    if afterCommit > metadataKept { counts.metaDropped += 1; continue }
                }
                apply(op, to: &tree)
                continue
            }
            guard op.kind == "write", let id = node[i] else { continue }
            let offset = op.int("off") ?? 0
            var pieces: [(Int64, Int64)] = [(offset, Int64(op.payload.count))]
            if durableAt[i] >= cut {
                switch fate(i) {
                case .kept: counts.kept += 1
                case .dropped: counts.dropped += 1; pieces = []
                case .torn:
                    counts.torn += 1
                    pieces = []
                    var start = offset
                    while start < offset + Int64(op.payload.count) {
                        let end = min(offset + Int64(op.payload.count), (start / 4096 + 1) * 4096)
                        if rng.chance(0.5) { pieces.append((start, end - start)) }
                        start = end
                    }
                }
            }
            ensure(id, in: &tree)
            for (start, length) in pieces where length > 0 {
                var bytes = tree.nodes[id]!.bytes
                let end = Int(start + length)
                if bytes.count < end { bytes.append(contentsOf: repeatElement(0, count: end - bytes.count)) }
                let from = Int(start - offset)
                bytes.replaceSubrange(Int(start)..<end, with: op.payload[from..<(from + Int(length))])
                tree.nodes[id]!.bytes = bytes
                written[id, default: []].append((start, length, i))
            }
        }
        let at = cut < ops.count ? "before \(ops[cut])" : "after the last call"
        let description = "crash \(at) (call \(cut) of \(ops.count)); last commit #\(lastCommit); "
            + "metadata after it: \(min(metadataKept, afterCommit)) of \(afterCommit) kept; "
            + "unsynced writes: \(counts.kept) kept, \(counts.dropped) dropped, \(counts.torn) torn at 4 KiB"
        return State(tree: tree, written: written, description: description)
    }

    /// A node first met in a call after the snapshot: empty, with the mode its open gave it.
    private func ensure(_ id: Int, in tree: inout ModelTree) {
        guard tree.nodes[id] == nil else { return }
        let opened = ops.first { $0.kind == "open" && node[$0.seq] == id }
        tree.nodes[id] = ModelTree.Node(ino: opened?.ino ?? 0, born: opened?.seq ?? 0,
                                        mode: UInt32(opened?["mode"] ?? "") ?? 0o600, bytes: [])
    }

    private func apply(_ op: TraceOp, to tree: inout ModelTree) {
        let i = op.seq
        switch op.kind {
        case "open":
            guard let id = node[i] else { return }
            ensure(id, in: &tree)
            if op["tmpfile"] != "1", let path = op["path"], inScope(path) { tree.entries[path] = .file(id) }
            if op["trunc"] == "1" { tree.nodes[id]!.bytes = [] }
        case "link":
            if let id = node[i], let to = op["to"], inScope(to) { ensure(id, in: &tree); tree.entries[to] = .file(id) }
        case "rename": if let from = op["from"], let to = op["to"] { tree.move(from, to) }
        case "exchange": if let a = op["from"], let b = op["to"] { tree.exchange(a, b) }
        case "unlink", "rmdir": if let path = op["path"] { tree.removeTree(path) }
        case "mkdir": if let path = op["path"], inScope(path) { tree.entries[path] = .folder(UInt32(op["mode"] ?? "") ?? 0o755) }
        case "symlink": if let path = op["path"], inScope(path) { tree.entries[path] = .symlink(op["target"] ?? "") }
        case "truncate", "allocate":
            guard let id = node[i] else { return }
            ensure(id, in: &tree)
            let length = Int((op.int("off") ?? 0) + (op.int("len") ?? 0))
            var bytes = tree.nodes[id]!.bytes
            if op.kind == "truncate" && bytes.count > length { bytes.removeSubrange(length...) }
            if bytes.count < length { bytes.append(contentsOf: repeatElement(0, count: length - bytes.count)) }
            tree.nodes[id]!.bytes = bytes
        case "chmod":
            if let id = node[i] { ensure(id, in: &tree); tree.nodes[id]!.mode = UInt32(op["mode"] ?? "") ?? 0o600 }
        default: break
        }
    }

    /// The node whose inode was `ino` when op `seq` ran: the latest made with it before then.
    func node(inode ino: UInt64, before seq: Int) -> Int? {
        var best: (id: Int, born: Int)?
        for (id, n) in before.nodes where n.ino == ino { best = (id, -1) }
        for op in ops[0..<min(seq, ops.count)] where op.kind == "open" && op.ino == ino {
            if let id = node[op.seq] { best = (id, op.seq) }
        }
        return best?.id
    }
}
