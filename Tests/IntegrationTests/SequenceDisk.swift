#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorTestSupport

/// What ``SequenceTests`` looks at on disk around DEST: the generation store of an atomic DEST
/// (every listed `gN` must be one version's whole set), fingerprints of trees for "this command
/// changed nothing", and the folder DEST is in, whose other entries (a canary folder planted
/// beside DEST, a symlink to DEST) no command may touch.
final class SequenceDisk {
    let dest: String
    let parent: String
    let store: String
    let alias: String
    let canary: CanaryTree
    private let canaryBefore: [String]
    private let othersBefore: [String]
    /// sha256 by device, inode, size, mtime and ctime: generations share files as hard links, so
    /// one file is hashed once however many sets hold it.
    private var shaCache: [String: String] = [:]

    init(dest: String) throws {
        self.dest = dest
        parent = (dest as NSString).deletingLastPathComponent
        store = dest + ".generations"
        let name = (dest as NSString).lastPathComponent
        alias = parent + "/alias-of-" + name
        // A folder named as an older mirror named its switch link beside DEST, with a file in it:
        // a run must never treat a name beside DEST as its own.
        canary = try CanaryTree(at: parent + "/." + name + ".mirror-switch", layout: ["keep.txt", "deep/er/keep.bin"])
        guard symlink(name, alias) == 0 else { throw HarnessError.posix("symlink \(alias)") }
        canaryBefore = try canary.snapshot()
        othersBefore = try Self.othersListing(parent, except: [name, name + ".generations"])
    }

    /// Entries of DEST's folder other than DEST and its store: name, type, and a symlink's target.
    private static func othersListing(_ parent: String, except: Set<String>) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: parent).filter { !except.contains($0) }.sorted().map { name in
            var st = stat()
            guard lstat(parent + "/" + name, &st) == 0 else { return "\(name) gone" }
            let target = (st.st_mode & S_IFMT) == S_IFLNK ? " -> " + ((try? FileManager.default.destinationOfSymbolicLink(atPath: parent + "/" + name)) ?? "?") : ""
            return "\(name) \(st.st_mode & S_IFMT) ino \(st.st_ino)\(target)"
        }
    }

    /// Nothing outside DEST and DEST.generations changed since the walk began.
    func outsideChanges() throws -> [String] {
        let name = (dest as NSString).lastPathComponent
        var problems: [String] = []
        let others = try Self.othersListing(parent, except: [name, name + ".generations"])
        if others != othersBefore {
            problems.append("outside DEST: the entries beside DEST changed: \(Set(others).symmetricDifference(othersBefore).sorted())")
        }
        let now = try canary.snapshot()
        if now != canaryBefore {
            problems.append("outside DEST: the canary \(canary.root) changed: \(Set(now).symmetricDifference(canaryBefore).sorted())")
        }
        return problems
    }

    /// A fingerprint of DEST, its store and everything beside them (lstat only, nothing followed):
    /// path, type, mode, size, mtime, ctime, inode and link count, so any write shows.
    func fingerprint() -> [String] {
        var lines: [String] = []
        let name = (dest as NSString).lastPathComponent
        for top in [name, name + ".generations", (canary.root as NSString).lastPathComponent, (alias as NSString).lastPathComponent] {
            Self.walk(parent + "/" + top, top, into: &lines)
        }
        return lines.sorted()
    }

    private static func walk(_ path: String, _ shown: String, into lines: inout [String]) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        lines.append("\(shown) \(String(st.st_mode, radix: 8)) \(st.st_size) \(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec) "
                     + "\(st.st_ctim.tv_sec).\(st.st_ctim.tv_nsec) ino \(st.st_ino) n \(st.st_nlink)")
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return }
        for child in ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []) {
            walk(path + "/" + child, shown + "/" + child, into: &lines)
        }
    }

    // MARK: - The generation store

    /// The generation DEST's symlink shows, or nil when DEST is no generation's symlink.
    var shownGeneration: Int? {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: dest),
              let last = target.split(separator: "/").last, last.hasPrefix("g") else { return nil }
        return Int(last.dropFirst())
    }

    /// Whether DEST is a symlink (an atomic DEST, its conversion finished).
    var isAtomic: Bool {
        var st = stat()
        return lstat(dest, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK
    }

    /// The generations the store lists (`gN`), oldest first.
    func generations() -> [Int] {
        ((try? FileManager.default.contentsOfDirectory(atPath: store)) ?? []).compactMap { name in
            guard name.hasPrefix("g"), name.count > 1, name.dropFirst().allSatisfy(\.isNumber) else { return nil }
            return Int(name.dropFirst())
        }.sorted()
    }

    /// Every entry of the store, for messages.
    func storeListing() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: store)) ?? []).sorted() }

    /// The files under `root` (relative path to sha256), or a description of what is not a file.
    func files(under root: String) throws -> (files: [String: String], odd: [String]) {
        var files: [String: String] = [:]
        var odd: [String] = []
        var pending = [""]
        while let relative = pending.popLast() {
            let folder = relative.isEmpty ? root : root + "/" + relative
            for name in try FileManager.default.contentsOfDirectory(atPath: folder) {
                let path = relative.isEmpty ? name : relative + "/" + name
                var st = stat()
                guard lstat(root + "/" + path, &st) == 0 else { odd.append("\(path) vanished"); continue }
                switch st.st_mode & S_IFMT {
                case S_IFDIR: pending.append(path)
                case S_IFREG:
                    let key = "\(st.st_dev):\(st.st_ino):\(st.st_size):\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec):\(st.st_ctim.tv_sec).\(st.st_ctim.tv_nsec)"
                    if let sha = shaCache[key] { files[path] = sha } else {
                        let sha = try TestData.sha256(ofFileAt: root + "/" + path)
                        shaCache[key] = sha
                        files[path] = sha
                    }
                default: odd.append("\(path) is not a file or folder (mode \(String(st.st_mode, radix: 8)))")
                }
            }
        }
        if shaCache.count > 20_000 { shaCache = [:] }
        return (files, odd)
    }

    /// Which versions the set at `root` is whole of (exactly the version's files with their bytes),
    /// paths in `exempt` (changed by hand) left out on both sides.
    func wholeOf(_ root: String, versions: [[String: SequenceWorld.File]], exempt: Set<String>) throws -> (matches: [Int], odd: [String], seen: [String: String]) {
        let (found, odd) = try files(under: root)
        let seen = found.filter { !exempt.contains($0.key) }
        var matches: [Int] = []
        for (v, files) in versions.enumerated() {
            var want: [String: String] = [:]
            for (path, file) in files where !exempt.contains(path) { want[path] = file.sha256 }
            if want == seen { matches.append(v) }
        }
        return (matches, odd, seen)
    }

    /// Invariant: every generation the store lists is one version's whole set.
    func wholeGenerations(versions: [[String: SequenceWorld.File]], exempt: [Int: Set<String>]) throws -> [String] {
        var problems: [String] = []
        for n in generations() {
            let (matches, odd, seen) = try wholeOf(store + "/g\(n)", versions: versions, exempt: exempt[n] ?? [])
            if matches.isEmpty || !odd.isEmpty {
                problems.append("whole sets: \(store)/g\(n) is no version's whole set: "
                    + seen.keys.sorted().map { "\($0)=\(seen[$0]!.prefix(8))" }.joined(separator: " ")
                    + (odd.isEmpty ? "" : "; " + odd.joined(separator: ", ")) + "; store holds \(storeListing())")
            }
        }
        return problems
    }
}
