#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorKit

/// A real forward proxy, Debian's `squid`, on 127.0.0.1, for tests of `http_proxy`,
/// `https_proxy` and `no_proxy` (docs/fleet.md). It caches nothing (`cache deny all`), or with
/// `caching` keeps responses in memory for as long as their headers allow (a fleet's proxy that
/// may answer from what it stored without asking the origin), allows
/// every request and `CONNECT` to any port (it listens on loopback only), and logs each request
/// to its own access log. Everything it writes is in a private ``TemporaryDirectory``.
///
/// As root, squid would switch to its `proxy` user and could not write the 0700 folder, so it
/// runs as nobody (`setpriv`), with the folder handed to nobody; as another user it runs as that user.
public final class SquidProxy {
    public let port: Int
    public let accessLogPath: String
    private let folder: TemporaryDirectory
    private var process: ChildProcess?
    /// Marks the URLs of ``settledRequests()``'s own requests, left out of ``requests(atLeast:timeout:)``.
    private let markerToken = "harness-marker-" + String(UInt64.random(in: .min ... .max), radix: 16)
    private var markers = 0

    /// "http://127.0.0.1:PORT"
    public var url: String { "http://127.0.0.1:\(port)" }

    public init(caching: Bool = false) throws {
        let squid = "/usr/sbin/squid"
        guard access(squid, X_OK) == 0 else { throw HarnessError("squid not found: run scripts/setup") }
        folder = try TemporaryDirectory(prefix: "mirror-squid")
        accessLogPath = folder.path("access.log")
        let asRoot = getuid() == 0
        if asRoot { guard chown(folder.path, 65534, 65534) == 0 else { throw HarnessError.posix("chown \(folder.path)") } }
        var failures: [String] = []
        for _ in 1...3 {
            let candidate = try Loopback.freePort()
            let config = """
                http_port 127.0.0.1:\(candidate)
                pid_filename \(folder.path("squid.pid"))
                access_log stdio:\(accessLogPath) squid
                cache_log \(folder.path("cache.log"))
                cache_store_log none
                \(caching ? Self.memoryCache : "cache deny all")
                http_access allow all
                visible_hostname localhost
                coredump_dir \(folder.path)
                pinger_enable off
                netdb_filename none
                shutdown_lifetime 0 seconds
                logfile_rotate 0

                """
            try Data(config.utf8).write(to: URL(fileURLWithPath: folder.path("squid.conf")))
            let command = [squid, "-N", "-f", folder.path("squid.conf")]
            let child = asRoot
                ? try ChildProcess("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups"] + command, cwd: folder.path)
                : try ChildProcess(squid, Array(command.dropFirst()), cwd: folder.path)
            let deadline = monotonicSeconds() + 15
            while monotonicSeconds() < deadline && child.isRunning {
                // Any HTTP answer (squid refuses a request without an absolute URL) means it listens.
                if (try? Loopback.httpGet(port: candidate, path: "/", timeout: 1)) != nil {
                    process = child
                    port = candidate
                    return
                }
                sleepSeconds(0.05)
            }
            child.signal(SIGKILL, toGroup: true)
            _ = try? child.wait(timeout: 5)
            failures.append((try? String(contentsOfFile: folder.path("cache.log"), encoding: .utf8)) ?? "")
        }
        throw HarnessError("squid did not start in 3 attempts:\n" + failures.joined(separator: "\n---\n"))
    }

    deinit { stop() }

    /// A memory cache only (no `cache_dir`): responses up to 4 MiB, fresh as long as their
    /// `Cache-Control`/`Expires` say; client `no-cache` and `Pragma: no-cache` honoured (squid's
    /// default, no `ignore-reload`).
    static let memoryCache = """
        cache_mem 16 MB
        maximum_object_size_in_memory 4 MB
        memory_cache_mode always
        refresh_pattern . 0 20% 4320
        """

    /// Stops squid (SIGTERM; `shutdown_lifetime 0` makes it exit at once). Idempotent.
    public func stop() {
        guard let child = process else { return }
        process = nil
        child.signal(SIGTERM)
        _ = try? child.wait(timeout: 10)
    }

    /// The requests squid handled so far: method, URL (`CONNECT 127.0.0.1:PORT` for a tunnel) and
    /// squid's result (`TCP_MISS/200`, `TCP_MEM_HIT/200`, `TCP_REFRESH_MODIFIED/200`...), without
    /// the readiness probe. squid writes a line when the request ends: poll briefly.
    public func requests(atLeast count: Int = 0, timeout: Double = 5) -> [(method: String, url: String, result: String)] {
        let deadline = monotonicSeconds() + timeout
        while true {
            let text = (try? String(contentsOfFile: accessLogPath, encoding: .utf8)) ?? ""
            let lines: [(method: String, url: String, result: String)] = text.split(separator: "\n").compactMap { line in
                // squid format: time elapsed client code/status bytes method URL user hierarchy type
                let f = line.split(separator: " ", omittingEmptySubsequences: true)
                guard f.count >= 7, f[6].hasPrefix("http") || f[5] == "CONNECT", !f[6].contains(markerToken) else { return nil }
                return (String(f[5]), String(f[6]), String(f[3]))
            }
            if lines.count >= count || monotonicSeconds() >= deadline { return lines }
            sleepSeconds(0.05)
        }
    }

    /// Every request squid handled so far, late lines included, without waiting on a clock:
    /// sends a marker request of its own through squid (to a port that refuses it, so squid
    /// answers an error at once) and returns the log once the marker's line is in it. squid is
    /// one process with one event loop: a transaction that ended, or whose client went away,
    /// before the marker was sent is logged before the marker's (see
    /// ``NginxServer/settledAccessLog(timeout:)``).
    public func settledRequests(timeout: Double = 10) throws -> [(method: String, url: String, result: String)] {
        markers += 1
        let marker = "http://127.0.0.1:\(try Loopback.freePort())/\(markerToken)-\(markers)"
        _ = try Loopback.httpGet(port: port, path: marker, timeout: timeout)
        try Wait.until("squid logged the marker request \(marker)", timeout: timeout) {
            ((try? String(contentsOfFile: accessLogPath, encoding: .utf8)) ?? "").contains(marker)
        }
        return requests(timeout: 0)
    }
}
