import Foundation
import MirrorCore
import MirrorTestSupport

/// A scenario against the project's fault-injecting server: files served with a chosen fault, a
/// manifest describing the true content, and a destination, all removed afterwards.
final class FaultFixture {
    let dir: TemporaryDirectory
    let server: FaultServer
    let dest: String
    let manifestPath: String
    var manifest: ManifestBuilder

    init(host: String = "127.0.0.1") throws {
        dir = try TemporaryDirectory(prefix: "mirror-fault")
        server = try FaultServer(host: host)
        dest = dir.path("dest")
        manifestPath = dir.path("manifest.yaml")
        manifest = ManifestBuilder(baseURL: server.baseURL)
    }

    /// Serves `size` deterministic bytes at `/path` with `fault`, lists them in the manifest, and
    /// returns the bytes.
    @discardableResult
    func serve(_ path: String, size: Int, seed: UInt64 = 1, fault: Fault = .none, listed: Bool = true) -> [UInt8] {
        let bytes = TestData.bytes(count: size, seed: seed)
        server.serve("/" + path, bytes: bytes, fault: fault)
        if listed { manifest.add(path: path, size: Int64(size), sha256: TestData.sha256(of: bytes)) }
        return bytes
    }

    /// Runs `mirror sync` with a short stall timeout (the faults stall on purpose), bounded in time.
    func sync(_ extra: [String] = [], timeout: Double = 90) throws -> ProcessResult {
        try manifest.write(to: manifestPath)
        return try Mirror.run(
                        ["sync", manifestPath, "--dest", dest, "--stall-timeout", "2s"] + extra, timeout: timeout)
    }

    func start(_ extra: [String] = []) throws -> ChildProcess {
        try manifest.write(to: manifestPath)
        return try Mirror.start(["sync", manifestPath, "--dest", dest, "--stall-timeout", "2s"] + extra)
    }

    /// The sha256 of the file at `path` under the destination; nil when nothing is there.
    func digest(_ path: String) -> String? {
        FileManager.default.contents(atPath: dest + "/" + path).map { TestData.sha256(of: Array($0)) }
    }

    /// A server that turns dishonest in the middle of a transfer: the first response stalls after
    /// `at` bytes; once they are in the partial file, `/path` is served with `fault`, and the retry
    /// that follows the stall timeout meets it. Returns the finished run.
    func stallThenServe(_ path: String, bytes: [UInt8], at: Int, fault: Fault, extra: [String] = []) throws -> ProcessResult {
        server.serve("/" + path, bytes: bytes, fault: .stall(afterBytes: Int64(at)))
        manifest.add(path: path, size: Int64(bytes.count), sha256: TestData.sha256(of: bytes))
        let run = try start(extra)
        try Wait.until("\(path)'s partial file holds \(at) bytes or the run ended", timeout: 20) {
            partialSize(path) >= Int64(at) || !run.isRunning
        }
        server.serve("/" + path, bytes: bytes, fault: fault)
        return try run.wait(timeout: 60)
    }

    func partialSize(_ path: String) -> Int64 {
        var st = stat()
        return stat(dest + "/.mirror/partial/" + PartialFile.name(for: path), &st) == 0 ? Int64(st.st_size) : -1
    }

    /// The requests in the order they were made. The server logs a request when its response ends,
    /// so a stalled response can be logged after the retry that followed it; connection ids follow
    /// the order of accepts, and requests on one connection are logged in order.
    func requestsInOrder(count: Int) -> [FaultRequest] {
        server.waitForRequests(count: count).enumerated()
            .sorted { ($0.element.connectionID, $0.offset) < ($1.element.connectionID, $1.offset) }
            .map(\.element)
    }

    /// The `--json` summary, parsed.
    static func json(_ result: ProcessResult) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any]
    }
}
