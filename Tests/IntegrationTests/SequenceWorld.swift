import Foundation
import MirrorTestSupport

/// The served side and the model of ``SequenceTests``: a fixed set of paths, three manifest
/// versions of them drawn from the seed, each version's files served by one nginx under its own
/// folder (`v0/`, `v1/`, `v2/`) so that switching versions is only a matter of which manifest a
/// run gets, and what every path may legitimately hold.
final class SequenceWorld {
    /// A file's bytes: those of `seed`, then each of `patches` applied in turn (4 KiB of other
    /// bytes at an offset the patch's seed picks), so that an edited file shares most of its
    /// chunks with the version before and runs meet chunk deltas.
    struct File { var size: Int64; var seed: UInt64; var patches: [UInt64] = []; var sha256: String }
    /// One served file: a path of one version.
    struct Served: Hashable { var version: Int; var path: String }

    /// Large paths are segmented when a run passes `--segments-above 1M`. Nested folders, a space,
    /// and one path that turns between file and folder (``turns``): a version lists at most one of
    /// the pair, and the next one often the other, so runs meet a file where a folder must go.
    static let paths: [(path: String, large: Bool)] = [
        ("big.bin", true), ("media/clip one.bin", true), ("media/deep/clip two.bin", true),
        ("notes.txt", false), ("docs/a.dat", false), ("docs/b.dat", false),
        ("docs/deep/er/c.dat", false), ("z.bin", false), ("pf", false), ("pf/inner.bin", false),
    ]
    /// Pairs of paths of which a version lists at most one: a file, and a file inside a folder of
    /// that name.
    static let turns: [(file: String, inner: String)] = [("pf", "pf/inner.bin")]
    static let versionCount = 3

    let fx: SyncFixture
    private(set) var versions: [[String: File]] = []
    /// Every sha256 that some version lists for a path: what the path may hold.
    private(set) var digests: [String: Set<String>] = [:]
    /// Served files now holding other bytes of the same size, with the step that restores them.
    private(set) var changed: [Served: Int] = [:]
    /// Served files get distinct, increasing mtimes, so nginx's ETag and Last-Modified change
    /// with their content, as on a real server (nginx's ETag is mtime and size, in seconds).
    private var fakeTime = 1_600_000_000

    init(rng: inout SeededRandom, limitRate: String) throws {
        fx = try SyncFixture(nginx: .init(limitRate: limitRate))
        for v in 0..<Self.versionCount {
            var files: [String: File] = [:]
            while files.count < 4 {
                files = [:]
                for (path, large) in Self.paths {
                    // Now and then a path takes the bytes another path had in the version before
                    // (a rename or a duplicate), so runs meet reuse by content.
                    let others = (versions.last ?? [:]).filter { $0.key != path && $0.value.size > 0 }.sorted { $0.key < $1.key }
                    if !others.isEmpty && rng.chance(0.12) {
                        files[path] = others[rng.below(others.count)].value                // renamed or duplicated
                    } else if let old = versions.last?[path] {
                        switch rng.weighted([10, 15, 20, 25, 30]) {
                        case 0: continue                                                  // dropped
                        case 1: files[path] = old                                         // unchanged
                        case 2 where old.size > 8192:                                     // edited: a delta's case
                            files[path] = File(size: old.size, seed: old.seed, patches: old.patches + [rng.next()], sha256: "")
                        case 2, 3: files[path] = File(size: old.size, seed: rng.next(), sha256: "")  // same size, new bytes
                        default: files[path] = File(size: Self.size(large, &rng), seed: rng.next(), sha256: "")
                        }
                    } else if rng.chance(v == 0 ? 0.85 : 0.6) {                          // added
                        files[path] = File(size: Self.size(large, &rng), seed: rng.next(), sha256: "")
                    }
                }
                // A turning pair: none, the file or the folder; after one form, mostly the other.
                for (file, inner) in Self.turns {
                    let before = versions.last.map { $0[file] != nil ? 1 : $0[inner] != nil ? 2 : 0 } ?? 0
                    let form = rng.weighted(before == 1 ? [1, 2, 7] : before == 2 ? [1, 7, 2] : [1, 4, 5])
                    let (keep, drop) = form == 2 ? (inner, file) : (file, inner)
                    files[drop] = nil
                    if form == 0 { files[keep] = nil } else if files[keep] == nil || rng.chance(0.5) {
                        files[keep] = File(size: Self.size(false, &rng), seed: rng.next(), sha256: "")
                    }
                }
            }
            for (path, _) in Self.paths {
                guard var file = files[path] else { continue }
                file.sha256 = try write(Served(version: v, path: path), file)
                files[path] = file
                digests[path, default: []].insert(file.sha256)
            }
            try publish(v, files)
            versions.append(files)
        }
    }

    /// Large: 1.5–6 MB. Small: 100 KB–1 MB, now and then empty or a few bytes.
    private static func size(_ large: Bool, _ rng: inout SeededRandom) -> Int64 {
        if large { return Int64(rng.inRange(1_500_000...6_000_000)) }
        if rng.chance(0.05) { return Int64(rng.below(3)) }
        return Int64(rng.inRange(100_000...1_000_000))
    }

    func manifestPath(_ version: Int) -> String { fx.dir.path("m\(version).yaml") }
    func destPath(_ path: String) -> String { fx.dest + "/" + path }
    var allPaths: [String] { Self.paths.map(\.path).filter { digests[$0] != nil } }

    /// The publisher's side: `mirror manifest create --chunks` over the version's folder, so the
    /// large files get chunk indexes (under `vN/.mirror-chunks/`) and runs meet deltas. The
    /// manifest must list exactly the model's files, with the model's digests.
    private func publish(_ v: Int, _ files: [String: File]) throws {
        let run = try Mirror.run(
                           ["manifest", "create", fx.www + "/v\(v)", "--base-url", fx.server.baseURL + "v\(v)/",
                            "--chunks", "--chunks-above", "1M", "-o", manifestPath(v)], timeout: 60)
        guard run.exitCode == 0 else { throw HarnessError("manifest create for v\(v): \(run)") }
        let text = try String(contentsOfFile: manifestPath(v), encoding: .utf8)
        for (path, file) in files where !text.contains("sha256: \(file.sha256)") || !text.contains("path: \"\(path)\"") {
            throw HarnessError("manifest create for v\(v) does not list \(path) with sha256 \(file.sha256)")
        }
    }

    /// Writes `file`'s bytes as `served` (the seed's bytes, then its patches); returns their sha256.
    @discardableResult
    private func write(_ served: Served, _ file: File) throws -> String {
        try write(served, size: file.size, seed: file.seed, patches: file.patches)
    }

    @discardableResult
    private func write(_ served: Served, size: Int64, seed: UInt64, patches: [UInt64] = []) throws -> String {
        let path = fx.www + "/v\(served.version)/" + served.path
        var sha = try TestData.writeFile(at: path, size: size, seed: seed)
        if !patches.isEmpty {
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            for patch in patches {
                let at = Int(patch % UInt64(bytes.count - 4096))
                bytes.replaceSubrange(at ..< at + 4096, with: TestData.bytes(count: 4096, seed: patch))
            }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            sha = TestData.sha256(of: bytes)
        }
        fakeTime += 10
        var times = [timespec(tv_sec: fakeTime, tv_nsec: 0), timespec(tv_sec: fakeTime, tv_nsec: 0)]
        guard utimensat(AT_FDCWD, path, &times, 0) == 0 else { throw HarnessError.posix("utimensat(\(path))") }
        return sha
    }

    /// Serves other bytes of the same size for one non-empty file of `version`, until `until`.
    /// Returns the file changed, or nil when there is none left to change.
    func changeServed(version: Int, until: Int, rng: inout SeededRandom) throws -> Served? {
        let candidates = versions[version].filter { $0.value.size > 0 && changed[Served(version: version, path: $0.key)] == nil }
        guard !candidates.isEmpty else { return nil }
        let path = candidates.keys.sorted()[rng.below(candidates.count)]
        let served = Served(version: version, path: path)
        try write(served, size: versions[version][path]!.size, seed: rng.next())
        changed[served] = until
        return served
    }

    /// Puts back the right bytes of every changed file due by `step`; returns them.
    func restoreServed(dueBy step: Int) throws -> [Served] {
        let due = changed.filter { $0.value <= step }.keys.sorted { ($0.version, $0.path) < ($1.version, $1.path) }
        for served in due {
            let file = versions[served.version][served.path]!
            try write(served, file)
            changed[served] = nil
        }
        return due
    }

    /// True when every file of `version` is served with the bytes its manifest lists.
    func serverIsCorrect(for version: Int) -> Bool { !changed.keys.contains { $0.version == version } }

    // MARK: - Invariants

    /// Invariant 1: at every path of any version, nothing or the bytes of some version of that
    /// path, except where the test itself tampered.
    func strayBytes(exempt: Set<String>) throws -> [String] {
        var problems: [String] = []
        for path in allPaths where !exempt.contains(path) {
            guard let size = FileDamage.size(of: destPath(path)) else {
                if FileManager.default.fileExists(atPath: destPath(path)) && !mayBeFolder(path) {
                    problems.append("\(path) is not a regular file")
                }
                continue
            }
            let sha = try TestData.sha256(ofFileAt: destPath(path))
            if !digests[path]!.contains(sha) {
                problems.append("invariant 1: \(path) holds bytes of no version (\(size) bytes, sha256 \(sha.prefix(12))); \(try anatomy(path))")
            }
        }
        return problems
    }

    /// Whether `path` may be a folder: some version lists a file inside it (a path that turns).
    func mayBeFolder(_ path: String) -> Bool {
        var st = stat()
        guard lstat(destPath(path), &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return false }
        return allPaths.contains { $0.hasPrefix(path + "/") }
    }

    /// Invariant 5: an atomic DEST shows all of one version and nothing else, or nothing at all
    /// (before its first complete run); paths in `exempt` (changed by hand) are left out.
    func mixedSet(exempt: Set<String>) throws -> [String] {
        var seen: [String: String] = [:]
        for path in allPaths where !exempt.contains(path) && FileDamage.size(of: destPath(path)) != nil {
            seen[path] = try TestData.sha256(ofFileAt: destPath(path))
        }
        if seen.isEmpty { return [] }
        for files in versions {
            var want: [String: String] = [:]
            for (path, file) in files where !exempt.contains(path) { want[path] = file.sha256 }
            if want == seen { return [] }
        }
        return ["invariant 5: the atomic DEST shows a mix of versions: "
                + seen.keys.sorted().map { "\($0)=\(seen[$0]?.prefix(8) ?? "")" }.joined(separator: " ")]
    }

    /// Invariant 2 (first half): after a run of `version` that exited 0, every listed path holds
    /// exactly that version's bytes.
    func mismatches(of version: Int) throws -> [String] {
        try versions[version].keys.sorted().compactMap { path in
            let expected = versions[version][path]!
            guard FileDamage.size(of: destPath(path)) != nil else { return "invariant 2: \(path) of v\(version) is missing" }
            let sha = try TestData.sha256(ofFileAt: destPath(path))
            return sha == expected.sha256 ? nil
                : "invariant 2: \(path) is not v\(version)'s (sha256 \(sha.prefix(12)), want \(expected.sha256.prefix(12))); \(try anatomy(path))"
        }
    }

    /// For a failure message: how far the file at `path` agrees with each version's bytes, from
    /// the start and up to the end of their overlap, so a spliced file reads as "the start of vX, the rest of vY".
    func anatomy(_ path: String) throws -> String {
        let held = [UInt8](try Data(contentsOf: URL(fileURLWithPath: destPath(path))))
        let parts = versions.enumerated().compactMap { v, files -> String? in
            guard let file = files[path] else { return nil }
            let bytes = TestData.bytes(count: Int(file.size), seed: file.seed)
            let overlap = min(held.count, bytes.count)
            var first = 0, last = 0
            while first < overlap && held[first] == bytes[first] { first += 1 }
            while last < overlap - first && held[overlap - 1 - last] == bytes[overlap - 1 - last] { last += 1 }
            let agree = [first > 0 ? "0..<\(first)" : nil, last > 0 ? "\(overlap - last)..<\(overlap)" : nil].compactMap { $0 }
            return "v\(v) (\(file.size) bytes) agrees on " + (agree.isEmpty ? "neither end" : agree.joined(separator: " and "))
        }
        return "held \(held.count) bytes; " + parts.joined(separator: ", ")
    }
}
