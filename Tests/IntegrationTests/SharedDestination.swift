import Foundation
import MirrorCore
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// One DEST that several commands use at once, as cron, a hand run and a monitor would: manifest
/// versions served by one nginx (slow enough that a large file keeps a run in flight), commands
/// started and waited for, and the conditions the tests wait on instead of clocks (a run holds the
/// lock, a waiter has opened the lock file, a run stopped at a named point).
final class SharedDestination {
    let fx: SyncFixture
    /// The shas of every served file, by manifest path and version.
    private(set) var versions: [String: [String: String]] = [:]

    var dest: String { fx.dest }
    var store: String { fx.dest + ".generations" }

    init(limitRate: String = "4m") throws {
        fx = try SyncFixture(nginx: .init(limitRate: limitRate))
    }

    /// Serves `files` (path: (size, seed)) as version `name`, written to `NAME.yaml`; each file is
    /// served at `NAME/PATH`, so versions never share a URL.
    @discardableResult
    func version(_ name: String, _ files: [String: (Int64, UInt64)]) throws -> String {
        var manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        var shas: [String: String] = [:]
        for (path, (size, seed)) in files.sorted(by: { $0.key < $1.key }) {
            let sha = try TestData.writeFile(at: fx.www + "/" + name + "/" + path, size: size, seed: seed)
            manifest.add(path: path, size: size, sha256: sha, url: fx.server.baseURL + name + "/" + path)
            shas[path] = sha
        }
        let path = manifestPath(name)
        try manifest.write(to: path)
        versions[name] = shas
        return path
    }

    func manifestPath(_ name: String) -> String { fx.dir.path(name + ".yaml") }

    /// `mirror ARGS`, waited for.
    func run(_ args: [String], environment: [String: String] = [:], cwd: String? = nil, timeout: Double = 120) throws -> ProcessResult {
        try Mirror.run(args, environment: environment,
                 cwd: cwd, timeout: timeout)
    }

    /// `mirror ARGS`, started.
    func start(_ args: [String], environment: [String: String] = [:]) throws -> ChildProcess {
        try Mirror.start(args, environment: environment)
    }

    func sync(_ version: String, dest: String? = nil, _ extra: [String] = [], environment: [String: String] = [:]) throws -> ProcessResult {
        try run(["sync", manifestPath(version), "--dest", dest ?? self.dest] + extra, environment: environment)
    }

    func startSync(_ version: String, dest: String? = nil, _ extra: [String] = [], environment: [String: String] = [:]) throws -> ChildProcess {
        try start(["sync", manifestPath(version), "--dest", dest ?? self.dest] + extra, environment: environment)
    }

    /// The sha of every regular file under `folder` (relative paths; `.mirror` at the top skipped).
    static func contents(of folder: String) throws -> [String: String] {
        var out: [String: String] = [:]
        guard let walker = FileManager.default.enumerator(atPath: folder + "/.") else { return out }
        while let relative = walker.nextObject() as? String {
            if relative == ".mirror" { walker.skipDescendants(); continue }
            var st = stat()
            guard lstat(folder + "/" + relative, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            out[relative] = try TestData.sha256(ofFileAt: folder + "/" + relative)
        }
        return out
    }

    /// What DEST shows, read through one descriptor.
    func shown() throws -> [String: String] { try Self.contents(of: dest + "/.") }

    /// Which version `folder` holds whole, or nil (a mix, a torn set, or no version).
    func versionHeld(by folder: String) throws -> String? {
        let held = try Self.contents(of: folder)
        return versions.first { $0.value == held }?.key
    }

    // MARK: - Conditions

    /// The pid written into the lock file at `lockPath` (the holder writes it once it has the lock).
    static func holder(of lockPath: String) -> Int32? {
        guard let text = try? String(contentsOfFile: lockPath, encoding: .utf8) else { return nil }
        return Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Whether process `pid` is stopped (`T` in `/proc/PID/stat`).
    static func isStopped(_ pid: pid_t) -> Bool {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return false }
        return text[text.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("T")
    }

    /// Takes an exclusive `flock` on `path` (made when missing) for the test, as a running sync
    /// would hold it; released by `close`.
    static func holdLock(_ path: String) throws -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0, flock(fd, LOCK_EX | LOCK_NB) == 0 else { throw HarnessError.posix("lock \(path)", errno: errno) }
        return fd
    }
}
