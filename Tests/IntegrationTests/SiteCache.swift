import Foundation
import MirrorTestSupport

/// A real nginx `proxy_cache` in front of an origin nginx: the site file that docs/fleet.md gives,
/// read from the page (so the page and the test cannot drift apart) and run whole.
final class SiteCache {
    let server: NginxServer
    let folder: TemporaryDirectory
    /// One line per request the cache answered: method, URI, Range, Cache-Control, Pragma,
    /// nginx's `$upstream_cache_status` (HIT, MISS, BYPASS...), status, body bytes.
    let statusLogPath: String

    struct Line: Equatable {
        var uri: String
        var range: String?
        var cacheControl: String?
        var pragma: String?
        var cacheStatus: String
        var status: Int
    }

    /// The documented site file, as an operator installs it, with only what must change here:
    /// the cache path, the port it listens on (on loopback), and the origin. `lock` and `slice`
    /// false drop those directives, to measure what they save.
    static func documented(origin: String, cachePath: String, port: Int, lock: Bool = true, slice: Bool = true) throws -> String {
        let page = try String(contentsOfFile: repositoryFile("docs/fleet.md"), encoding: .utf8)
        guard let marker = page.range(of: "<!-- SiteCacheTests reads the next nginx block"),
              let open = page.range(of: "```nginx\n", range: marker.upperBound..<page.endIndex),
              let close = page.range(of: "```", range: open.upperBound..<page.endIndex) else {
            throw HarnessError("docs/fleet.md: no nginx block after the SiteCacheTests marker")
        }
        let file = String(page[open.upperBound..<close.lowerBound])
        guard file.contains("/var/cache/nginx/mirror"), file.contains("http://origin.example.org"), file.contains("    listen 8080;\n") else {
            throw HarnessError("docs/fleet.md: the site file no longer names /var/cache/nginx/mirror, http://origin.example.org and `listen 8080;`")
        }
        let dropped = (lock ? [] : ["proxy_cache_lock"]) + (slice ? [] : ["slice ", "proxy_set_header Range", "proxy_cache_key"])
        return file.replacingOccurrences(of: "/var/cache/nginx/mirror", with: cachePath)
            .replacingOccurrences(of: "http://origin.example.org", with: origin)
            .replacingOccurrences(of: "    listen 8080;\n", with: "    listen 127.0.0.1:\(port);\n")
            .split(separator: "\n", omittingEmptySubsequences: false)
            .filter { line in !dropped.contains { line.trimmingCharacters(in: .whitespaces).hasPrefix($0) } }
            .joined(separator: "\n")
    }

    /// The absolute path of `relative` in this repository.
    static func repositoryFile(_ relative: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(relative).path
    }

    /// The port the site file's server listens on, and its URLs.
    let port: Int
    var baseURL: String { "http://127.0.0.1:\(port)/" }
    func url(_ path: String) -> String { baseURL + path }

    init(origin: NginxServer, lock: Bool = true, slice: Bool = true) throws {
        folder = try TemporaryDirectory(prefix: "mirror-cache")
        let cachePath = folder.path("cache")
        let root = folder.path("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        statusLogPath = folder.path("cache-status.log")
        port = try Loopback.freePort()
        let site = try Self.documented(origin: "http://127.0.0.1:\(origin.port)", cachePath: cachePath, port: port,
                                       lock: lock, slice: slice)
        let log = "log_format cachestatus '$request_method\\t$uri\\t$http_range\\t$http_cache_control\\t$http_pragma\\t"
            + "$upstream_cache_status\\t$status\\t$body_bytes_sent';\n"
        // The site file goes in `http { }` as conf.d would put it; its server logs what it
        // answered. The harness's own server (on another port) only tells when nginx is up,
        // which is when every `listen` of the file is bound too.
        let logged = site.replacingOccurrences(of: "server {\n", with: "server {\n    access_log \"\(statusLogPath)\" cachestatus;\n")
        server = try NginxServer(root: root, options: .init(extraHTTPConfig: log + logged))
    }

    /// The cache's requests so far, in the order nginx finished them.
    func lines() throws -> [Line] {
        let text = (try? String(contentsOfFile: statusLogPath, encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").map { raw in
            let f = raw.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard f.count == 8, let status = Int(f[6]) else { throw HarnessError("cache status log: unexpected line \(raw)") }
            func value(_ s: String) -> String? { s == "-" || s.isEmpty ? nil : s }
            return Line(uri: f[1], range: value(f[2]), cacheControl: value(f[3]), pragma: value(f[4]), cacheStatus: f[5], status: status)
        }
    }

    /// The files nginx stores the cache in (one per slice).
    func cacheFiles() -> [String] {
        let root = folder.path("cache")
        guard let walker = FileManager.default.enumerator(atPath: root) else { return [] }
        var files: [String] = []
        while let relative = walker.nextObject() as? String {
            var isFolder: ObjCBool = false
            let path = root + "/" + relative
            if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), !isFolder.boolValue { files.append(path) }
        }
        return files.sorted()
    }
}
