import Foundation
import MirrorTestSupport

/// A real nginx `proxy_cache` in front of an origin nginx, configured with the block that
/// docs/fleet.md documents (read from the page, so the page and the test cannot drift apart).
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

    /// The documented configuration: its `http { }` part and its `location` part. `lock` and
    /// `slice` false drop those directives, to measure what they save.
    static func documented(origin: String, cachePath: String, lock: Bool = true, slice: Bool = true) throws -> (http: String, location: String) {
        let page = try String(contentsOfFile: repositoryFile("docs/fleet.md"), encoding: .utf8)
        guard let marker = page.range(of: "<!-- SiteCacheTests reads the next nginx block"),
              let open = page.range(of: "```nginx\n", range: marker.upperBound..<page.endIndex),
              let close = page.range(of: "```", range: open.upperBound..<page.endIndex) else {
            throw HarnessError("docs/fleet.md: no nginx block after the SiteCacheTests marker")
        }
        let block = String(page[open.upperBound..<close.lowerBound])
        let parts = block.components(separatedBy: "# --- in the location of the cache's server { } ---")
        guard parts.count == 2 else { throw HarnessError("docs/fleet.md: the nginx block lacks its location marker") }
        let http = parts[0].replacingOccurrences(of: "/var/cache/nginx/mirror", with: cachePath)
        var location = parts[1].replacingOccurrences(of: "http://origin.example.org", with: origin)
        let dropped = (lock ? [] : ["proxy_cache_lock"]) + (slice ? [] : ["slice ", "proxy_set_header Range", "proxy_cache_key"])
        location = location.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { line in !dropped.contains { line.trimmingCharacters(in: .whitespaces).hasPrefix($0) } }
            .joined(separator: "\n")
        guard http.contains(cachePath), location.contains(origin) else {
            throw HarnessError("docs/fleet.md: the nginx block no longer names /var/cache/nginx/mirror and http://origin.example.org")
        }
        return (http, location)
    }

    /// The absolute path of `relative` in this repository.
    static func repositoryFile(_ relative: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(relative).path
    }

    init(origin: NginxServer, lock: Bool = true, slice: Bool = true) throws {
        folder = try TemporaryDirectory(prefix: "mirror-cache")
        let cachePath = folder.path("cache")
        let root = folder.path("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        statusLogPath = folder.path("cache-status.log")
        let config = try Self.documented(origin: "http://127.0.0.1:\(origin.port)", cachePath: cachePath, lock: lock, slice: slice)
        let log = "log_format cachestatus '$request_method\\t$uri\\t$http_range\\t$http_cache_control\\t$http_pragma\\t"
            + "$upstream_cache_status\\t$status\\t$body_bytes_sent';\naccess_log \"\(statusLogPath)\" cachestatus;\n"
        server = try NginxServer(root: root, options: .init(extraLocationConfig: config.location,
                                                            extraHTTPConfig: config.http + "\n" + log))
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
