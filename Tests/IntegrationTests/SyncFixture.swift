import Foundation
import MirrorCore
import MirrorTestSupport

/// One integration scenario: a served folder behind a real nginx on 127.0.0.1, a manifest
/// describing it, and a destination, all under one temporary folder removed afterwards.
final class SyncFixture {
    let dir: TemporaryDirectory
    let www: String
    let dest: String
    let manifestPath: String
    let server: NginxServer
    var manifest: ManifestBuilder

    convenience init(nginx options: NginxServer.Options = .init(), basePath: String = "") throws {
        try self.init(nginxFor: { _ in options }, basePath: basePath)
    }

    /// `nginxFor` makes nginx's options from the served folder's path (for extra `server` blocks).
    init(nginxFor options: (String) -> NginxServer.Options, basePath: String = "") throws {
        dir = try TemporaryDirectory(prefix: "mirror-it")
        www = dir.path("www")
        dest = dir.path("dest")
        manifestPath = dir.path("manifest.yaml")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        server = try NginxServer(root: www, options: options(www))
        manifest = ManifestBuilder(baseURL: server.baseURL + basePath)
    }

    /// Serves a new file of deterministic content and lists it in the manifest; returns its sha256.
    @discardableResult
    func addFile(_ path: String, size: Int64, seed: UInt64, listedSHA256: String? = nil) throws -> String {
        let sha = try TestData.writeFile(at: www + "/" + path, size: size, seed: seed)
        manifest.add(path: path, size: size, sha256: listedSHA256 ?? sha)
        return sha
    }

    func writeManifest() throws {
        try manifest.write(to: manifestPath)
    }

    /// Runs `mirror sync MANIFEST --dest DEST` plus `extra`.
    func sync(_ extra: [String] = [], timeout: Double = 300) throws -> ProcessResult {
        try Mirror.run(["sync", manifestPath, "--dest", dest] + extra, timeout: timeout)
    }

    /// Starts a sync without waiting for it.
    func startSync(_ extra: [String] = []) throws -> ChildProcess {
        try Mirror.start(["sync", manifestPath, "--dest", dest] + extra)
    }

    /// A proxy configured on the machine must not carry loopback test traffic elsewhere.
    static let loopbackOnly = Mirror.loopbackOnly

    /// The requests nginx has logged, once there are at least `count` (5 s at most; then what
    /// there is, and the test's checks report the shortfall). nginx logs a keep-alive request
    /// when it finishes it, which can be a moment after the client exited.
    func requests(atLeast count: Int) throws -> [AccessLogEntry] {
        try server.waitForAccessLog(count: count, timeout: 5)
    }

    /// Every request nginx has logged so far, late lines included (a marker request's line proves
    /// the earlier ones are written: ``NginxServer/settledAccessLog(timeout:)``). For a count to
    /// compare with later, and for "no request": `requestsSoFar().isEmpty`.
    func requestsSoFar() throws -> [AccessLogEntry] {
        try server.settledAccessLog()
    }

    func destPath(_ relative: String) -> String { dest + "/" + relative }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    func size(of path: String) -> Int64 {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : -1
    }
}
