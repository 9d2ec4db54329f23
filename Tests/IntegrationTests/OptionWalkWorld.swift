#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorTestSupport

/// The served side and the model of ``OptionWalk``: six paths, three manifest versions of them,
/// each made by `mirror manifest create` over its own served folder (`v0/` without times and
/// modes, `v1/` and `v2/` with `--preserve`, so a path may keep its bytes and change only its
/// `mode` or `mtime`) and signed with `mirror manifest sign`; the files a walk's options need (a
/// key, a CA, a netrc, a seed folder, a filter file); and the filters a run may draw.
final class OptionWorld {
    /// One listed file of a version: its bytes' digest, and the mode and time the manifest gives.
    struct Spec: Equatable {
        var seed: UInt64
        var size: Int
        var sha256: String
        var mode: UInt32?
        var mtime: Int?
    }

    /// A filter a run may draw: its arguments and which paths it selects, as rsync's rules say
    /// (docs/cli.md, "Choosing what a machine syncs": the last matching rule wins; a path no rule
    /// matches takes the opposite of the first rule).
    struct Filter {
        var label: String
        var args: [String]
        var selects: (String) -> Bool
    }

    static let paths = ["a.txt", "dir/b.bin", "dir/sub/c.bin", "media/d.bin", "big.bin", "z.txt"]
    /// A file of the user's, at a path no version lists.
    static let userPath = "notes/user.txt"
    /// Where a plain DEST gets another DEST inside it: a path no version lists.
    static let nestedPath = "lab/inner"
    static let versionCount = 3

    let fx: SyncFixture
    let keys: TestKeys
    let publicKey: String
    /// An OpenPGP keyring (`--keyring`): it checks checksum lists, so a run of the walk's YAML
    /// manifests with it and without `--trust` must be refused.
    let openPGP: OpenPGPKeys
    let keyring: String
    let caFile: String
    let netrc: String
    let seedFolder: String
    let rulesFile: String
    private(set) var versions: [[String: Spec]] = []
    /// Every digest some version lists for a path.
    private(set) var digests: [String: Set<String>] = [:]

    init(rng: inout SeededRandom) throws {
        fx = try SyncFixture(nginx: .init(limitRate: "4m"))
        keys = try TestKeys()
        let pair = try keys.generateEd25519("publisher")
        publicKey = pair.publicKey
        openPGP = try OpenPGPKeys()
        keyring = try openPGP.exportKeyring()
        caFile = keys.dir.path("lab-ca.pem")
        try TestKeys.openssl(["req", "-x509", "-newkey", "ed25519", "-nodes", "-keyout", keys.dir.path("lab-ca.key"),
                              "-out", caFile, "-subj", "/CN=lab", "-days", "2"])
        netrc = fx.dir.path("netrc")
        try "machine 127.0.0.1 login lab password lab\n".write(toFile: netrc, atomically: true, encoding: .utf8)
        rulesFile = fx.dir.path("room.rules")
        try "# a room that has no media\n- media/\n- *.txt\n".write(toFile: rulesFile, atomically: true, encoding: .utf8)
        seedFolder = fx.dir.path("seed")
        try FileManager.default.createDirectory(atPath: seedFolder, withIntermediateDirectories: true)
        var clock = 1_700_000_000
        for v in 0..<Self.versionCount {
            var files: [String: Spec] = [:]
            for path in Self.paths {
                let size = path == "big.bin" ? rng.inRange(1_200_000...2_500_000) : rng.inRange(1...60_000)
                if let old = versions.last?[path] {
                    switch rng.weighted([15, 30, 25, 30]) {
                    case 0: continue                                                    // dropped
                    case 1: files[path] = old                                           // unchanged
                    case 2: files[path] = Spec(seed: old.seed, size: old.size, sha256: old.sha256)  // same bytes, new mode or time
                    default: files[path] = Spec(seed: rng.next(), size: size, sha256: "")
                    }
                } else if rng.chance(0.8) {
                    files[path] = Spec(seed: rng.next(), size: size, sha256: "")
                }
            }
            if files.isEmpty { files["a.txt"] = Spec(seed: rng.next(), size: 100, sha256: "") }
            for path in files.keys.sorted() {
                var spec = files[path]!
                let file = fx.www + "/v\(v)/" + path
                spec.sha256 = try TestData.writeFile(at: file, size: Int64(spec.size), seed: spec.seed)
                if v > 0 {
                    // `--preserve` lists what the served file has: a drawn mode, and a time that
                    // moves unless the path kept everything.
                    let previous = versions.last?[path]
                    let keep = previous.map { $0.seed == spec.seed && $0.mode != nil && rng.chance(0.4) } ?? false
                    spec.mode = keep ? previous?.mode : rng.pick([0o644, 0o640, 0o600, 0o664, 0o755])
                    clock += 100
                    spec.mtime = keep ? previous?.mtime : clock
                    guard chmod(file, mode_t(spec.mode!)) == 0 else { throw HarnessError.posix("chmod \(file)") }
                    var times = [timespec(tv_sec: spec.mtime!, tv_nsec: 0), timespec(tv_sec: spec.mtime!, tv_nsec: 0)]
                    guard utimensat(AT_FDCWD, file, &times, 0) == 0 else { throw HarnessError.posix("utimensat \(file)") }
                }
                files[path] = spec
                digests[path, default: []].insert(spec.sha256)
                if rng.chance(0.3) {
                    try TestData.writeFile(at: seedFolder + "/v\(v)-" + path.replacingOccurrences(of: "/", with: "-"),
                                           size: Int64(spec.size), seed: spec.seed)
                }
            }
            let created = try Mirror.run(["manifest", "create", fx.www + "/v\(v)", "--base-url", fx.server.baseURL + "v\(v)/",
                                          "-o", manifestPath(v)] + (v > 0 ? ["--preserve"] : []), timeout: 60)
            guard created.exitCode == 0 else { throw HarnessError("manifest create v\(v): \(created)") }
            let signed = try Mirror.run(["manifest", "sign", manifestPath(v), "--key", pair.privateKey], timeout: 60)
            guard signed.exitCode == 0 else { throw HarnessError("manifest sign v\(v): \(signed)") }
            versions.append(files)
        }
    }

    func manifestPath(_ version: Int) -> String { fx.dir.path("m\(version).yaml") }

    /// The publisher's key, for the walk's signed publishes with a serial.
    var privateKey: String { keys.dir.path("publisher.pem") }
    /// Serials handed to `--trust` runs so far; each publish takes the next.
    private(set) var serialsDrawn = 0
    /// The highest serial a run surely recorded in DEST (it exited 0 or 1 past the lock, not a dry run).
    var surelyAccepted = 0

    func nextSerial() -> Int {
        serialsDrawn += 1
        return serialsDrawn
    }

    /// The signed manifest of serial `serial` (``publishSigned(_:serial:)``).
    func signedPath(_ serial: Int) -> String { fx.dir.path("s\(serial).yaml") }

    /// Publishes `version` again as a new manifest with `serial: serial` after `version: 1`, and signs it.
    func publishSigned(_ version: Int, serial: Int) throws {
        let text = try String(contentsOfFile: manifestPath(version), encoding: .utf8)
        guard text.hasPrefix("version: 1\n") else { throw HarnessError("m\(version).yaml does not start with version: 1") }
        try ("version: 1\nserial: \(serial)\n" + text.dropFirst("version: 1\n".count)).write(toFile: signedPath(serial), atomically: true, encoding: .utf8)
        let signed = try Mirror.run(["manifest", "sign", signedPath(serial), "--key", privateKey], timeout: 60)
        guard signed.exitCode == 0 else { throw HarnessError("manifest sign s\(serial): \(signed)") }
    }
    var dest: String { fx.dest }
    func destPath(_ path: String) -> String { fx.dest + "/" + path }

    /// The filters a run may draw.
    var filters: [Filter] {
        func base(_ path: String) -> String { String(path.split(separator: "/").last ?? "") }
        return [
            Filter(label: "none", args: [], selects: { _ in true }),
            Filter(label: "include dir/**", args: ["--include", "dir/**"], selects: { $0.hasPrefix("dir/") }),
            Filter(label: "exclude big.bin", args: ["--exclude", "big.bin"], selects: { $0 != "big.bin" }),
            Filter(label: "exclude dir/sub/", args: ["--exclude=dir/sub/"], selects: { !$0.hasPrefix("dir/sub/") }),
            Filter(label: "filter-from (- media/, - *.txt)", args: ["--filter-from", rulesFile],
                   selects: { !$0.hasPrefix("media/") && !base($0).hasSuffix(".txt") }),
            Filter(label: "exclude *.txt, include a.txt", args: ["--exclude", "*.txt", "--include", "a.txt"],
                   selects: { !base($0).hasSuffix(".txt") || $0 == "a.txt" }),
        ]
    }

    /// What a file at `path` is now: its sha256, permission bits and modification time (seconds),
    /// or nil when nothing (or no regular file) is there.
    static func look(_ path: String) throws -> Look? {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Look(sha256: try TestData.sha256(ofFileAt: path), mode: UInt32(st.st_mode) & 0o7777, mtime: st.st_mtim.tv_sec,
                    inode: UInt64(st.st_ino))
    }

    struct Look: Equatable {
        var sha256: String
        var mode: UInt32
        var mtime: Int
        var inode: UInt64
    }

    /// The files under `root` (relative path to what each is), `.mirror` left out.
    static func tree(_ root: String) throws -> [String: Look] {
        var out: [String: Look] = [:]
        var pending = [""]
        while let relative = pending.popLast() {
            let folder = relative.isEmpty ? root : root + "/" + relative
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { continue }
            for name in names where !(relative.isEmpty && name == ".mirror") {
                let path = relative.isEmpty ? name : relative + "/" + name
                var st = stat()
                guard lstat(root + "/" + path, &st) == 0 else { continue }
                if (st.st_mode & S_IFMT) == S_IFDIR { pending.append(path) } else if let look = try look(root + "/" + path) { out[path] = look }
            }
        }
        return out
    }
}
