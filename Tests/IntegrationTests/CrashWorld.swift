#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorCore
import MirrorTestSupport

/// One crash-state scenario's world: a served folder behind nginx (``SyncFixture``), DEST at
/// `disk/dest` so that everything a run may change (DEST, `dest.generations` beside it) is under
/// `disk/`, and what the versions of each path are.
final class CrashWorld {
    let fx: SyncFixture
    let disk: String
    let dest: String
    /// Every version's whole set (path to sha256), oldest first; the last is the manifest's now.
    var versions: [[String: String]] = []
    /// Sizes and bytes by sha256, for the checks of partial records.
    var sizes: [String: Int64] = [:]
    private var bytesCache: [String: [UInt8]] = [:]
    private var served: [String: String] = [:]
    var atomic = false
    /// Options of every sync (the traced one and those after the crash).
    var syncOptions: [String] = []

    init(limitRate: String? = nil) throws {
        fx = try SyncFixture(nginx: .init(limitRate: limitRate))
        disk = fx.dir.path("disk")
        dest = disk + "/dest"
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
    }

    var target: [String: String] { versions.last ?? [:] }
    var store: String { dest + ".generations" }
    var stateFolder: String { atomic || FileManager.default.fileExists(atPath: store + "/.mirror") ? store + "/.mirror" : dest + "/.mirror" }

    /// Serves `files` (path to size and seed) as the manifest's new version.
    func publish(_ files: [(path: String, size: Int64, seed: UInt64)]) throws {
        keepBytesOfCurrentVersion()
        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        var version: [String: String] = [:]
        for f in files {
            let sha = try fx.addFile(f.path, size: f.size, seed: f.seed)
            version[f.path] = sha
            sizes[sha] = f.size
            served[sha] = fx.www + "/" + f.path
            bytesCache[sha] = nil
        }
        try fx.writeManifest()
        versions.append(version)
    }

    /// Serves `files` (path to bytes) as the manifest's new version, the manifest written by
    /// `mirror manifest create` with `publisher` options (chunk indexes).
    func publishCreated(_ files: [String: [UInt8]], publisher: [String]) throws {
        var version: [String: String] = [:]
        for (path, bytes) in files {
            let full = fx.www + "/" + path
            try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: full))
            let sha = TestData.sha256(of: bytes)
            version[path] = sha
            sizes[sha] = Int64(bytes.count)
            bytesCache[sha] = bytes
        }
        let created = try Mirror.run(["manifest", "create", fx.www, "--base-url", fx.server.baseURL, "-o", fx.manifestPath] + publisher, timeout: 120)
        guard created.exitCode == 0 else { throw CrashTraceError("manifest create exited \(created.exitCode): \(created.stderr)") }
        versions.append(version)
    }

    /// Keeps a version's bytes readable after the server moves on (for the partial-record checks).
    func bytes(of sha: String) -> [UInt8]? {
        if let cached = bytesCache[sha] { return cached }
        guard let path = served[sha], let data = FileManager.default.contents(atPath: path) else { return nil }
        let bytes = [UInt8](data)
        guard TestData.sha256(of: bytes) == sha else { return nil }
        bytesCache[sha] = bytes
        return bytes
    }

    func keepBytesOfCurrentVersion() { for sha in target.values { _ = bytes(of: sha) } }

    func sync(_ extra: [String] = [], environment: [String: String] = [:]) throws -> ProcessResult {
        try Mirror.run(["sync", fx.manifestPath, "--dest", dest] + syncOptions + extra, environment: environment, timeout: 120)
    }

    func run(_ args: [String], environment: [String: String] = [:]) throws -> ProcessResult {
        try Mirror.run(args, environment: environment, timeout: 120)
    }
}

/// A scenario: what leads up to the recorded command, the command, and the commands run on each
/// state a power cut during it can leave.
struct CrashScenario: Sendable {
    let name: String
    /// Sets the world up and runs what comes before the recorded command (not recorded).
    let prepare: @Sendable (CrashWorld) throws -> Void
    /// The recorded command's arguments, and the exit codes it may end with.
    let recorded: @Sendable (CrashWorld) -> [String]
    var recordedExits: Set<Int32> = [0]
    /// nginx's rate per connection (a run to interrupt), and the recorded run's environment.
    var limitRate: String? = nil
    var environment: [String: String] = [:]
    /// After the next sync on a state: also `mirror rollback` (a rollback scenario).
    var rollbackAfter = false
    /// States that found a defect, kept as regression cases and checked before the drawn ones:
    /// a crash just before the last call that matches, everything before it durable.
    var regressions: [Regression] = []

    struct Regression: Sendable {
        let name: String
        let before: @Sendable (TraceOp) -> Bool
    }
}
