#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MirrorKit

/// One line of ``NginxServer``'s access log.
public struct AccessLogEntry: Sendable, Equatable, CustomStringConvertible {
    public var method: String
    /// nginx's `$uri`: the path, percent-decoded and normalised, without the query.
    public var uri: String
    public var status: Int
    /// nginx's `$body_bytes_sent`: body bytes actually sent (less than the file for an aborted
    /// or ranged transfer).
    public var bodyBytesSent: Int64
    /// The request's `Range` header, nil when absent.
    public var rangeHeader: String?
    /// The request's `If-Range` header, nil when absent.
    public var ifRange: String?
    /// nginx's `$request_uri`: the target exactly as the client sent it (still percent-encoded).
    public var requestURI: String
    /// nginx's `$connection` serial number: equal for requests sent on one reused connection.
    public var connection: Int
    /// nginx's `$connection_requests`: 1 for the first request on a connection, 2 for the next...
    public var connectionRequests: Int
    /// When nginx began reading the request and when it logged its end, in seconds since the
    /// epoch (`$msec` minus `$request_time`, and `$msec`; millisecond resolution).
    public var started: Double = 0
    public var ended: Double = 0
    /// nginx's `$server_protocol`: `HTTP/1.1`, or `HTTP/2.0` where the client negotiated HTTP/2.
    public var httpProtocol: String = ""

    public var description: String {
        "\(method) \(uri) \(status) \(bodyBytesSent)B range=\(rangeHeader ?? "-") if-range=\(ifRange ?? "-") conn=\(connection)#\(connectionRequests)"
    }
}

/// A real nginx serving a folder on 127.0.0.1, for integration tests of `mirror`'s HTTP behaviour.
///
/// Why real nginx rather than an in-process fake: ranges, `If-Range`, ETags, `max_ranges`,
/// `limit_rate`, keep-alive and aborted transfers are what `mirror`'s resume logic depends on, and a
/// production server gets them right (and wrong) the way servers in the field do.
///
/// nginx runs in the foreground (`daemon off; master_process off`) as a ``ChildProcess`` in its own
/// process group, with everything it writes (config, pid, logs, temp folders) in a private
/// ``TemporaryDirectory``, so parallel tests never share state and nothing outlives the server:
/// ``stop()`` and `deinit` stop it. With `master_process off` nginx never switches to an
/// unprivileged user, so as root in CI it can read the 0700 folders `mkdtemp` creates.
///
/// The port is found by binding port 0 and closing the socket, which leaves a window in which
/// another process can take it. Readiness is therefore not "something accepts on the port" but "a
/// secret per-instance URL answers with our token", and when nginx exits because the address is in
/// use it is restarted on a new port (3 attempts).
///
/// The access log is written without a buffer, one tab-separated line per request (see
/// ``accessLog()``). nginx writes the line when it finishes the request, i.e. before it closes an
/// HTTP/1.0 connection but possibly a moment after a keep-alive client has read the last byte; use
/// ``waitForAccessLog(count:timeout:)`` after a client such as `mirror` exits when a count is
/// expected, and ``settledAccessLog(timeout:)`` for every request so far (none included).
public final class NginxServer {
    public struct Options: Sendable {
        /// nginx `limit_rate` (bytes per second per connection, e.g. "32m"), to keep a transfer in
        /// flight long enough to interrupt it.
        public var limitRate: String?
        /// nginx `max_ranges`; 0 makes nginx ignore `Range` and answer 200 with the whole file.
        public var maxRanges: Int?
        /// Directives appended inside `server { }` (e.g. another `location`).
        public var extraServerConfig: String = ""
        /// Directives appended inside `location / { }` (e.g. `add_header`, `etag off;`).
        public var extraLocationConfig: String = ""
        /// Directives appended inside `http { }`.
        public var extraHTTPConfig: String = ""

        public init(limitRate: String? = nil, maxRanges: Int? = nil, extraServerConfig: String = "",
                    extraLocationConfig: String = "", extraHTTPConfig: String = "") {
            self.limitRate = limitRate
            self.maxRanges = maxRanges
            self.extraServerConfig = extraServerConfig
            self.extraLocationConfig = extraLocationConfig
            self.extraHTTPConfig = extraHTTPConfig
        }
    }

    /// The served folder (absolute, symlinks resolved).
    public let root: String
    public let options: Options
    public private(set) var port: Int = 0
    public let accessLogPath: String
    public let errorLogPath: String
    public let configPath: String

    private let prefix: TemporaryDirectory
    private var process: ChildProcess?
    private let readyPath: String
    private let readyToken: String
    /// The harness's own logged request (``settledAccessLog(timeout:)``), left out of ``accessLog()``.
    private let markerPath: String
    private var markers = 0

    /// "http://127.0.0.1:PORT/"
    public var baseURL: String { "http://127.0.0.1:\(port)/" }

    /// The URL of `path` on this server (a leading "/" is optional; `path` is used as given, so
    /// percent-encode it yourself where needed).
    public func url(_ path: String) -> String {
        baseURL + (path.hasPrefix("/") ? String(path.dropFirst()) : path)
    }

    /// Starts nginx serving `root`. Throws with nginx's error log when it does not come up.
    public init(root: String, options: Options = .init()) throws {
        guard let resolved = realpath(root, nil) else { throw HarnessError.posix("NginxServer: document root \(root)") }
        self.root = String(cString: resolved)
        free(resolved)
        self.options = options
        let nginx = try Self.locateNginx()
        prefix = try TemporaryDirectory(prefix: "mirror-nginx")
        accessLogPath = prefix.path("access.log")
        errorLogPath = prefix.path("error.log")
        configPath = prefix.path("nginx.conf")
        readyToken = (0..<4).map { _ in String(UInt32.random(in: .min ... .max), radix: 16) }.joined()
        readyPath = "/.harness-ready-\(readyToken)"
        markerPath = "/.harness-marker-\(readyToken)"
        for folder in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
            guard mkdir(prefix.path(folder), 0o700) == 0 else { throw HarnessError.posix("mkdir \(prefix.path(folder))") }
        }

        var failures: [String] = []
        for attempt in 1...3 {
            let candidate = try Loopback.freePort()
            let config = makeConfig(port: candidate)
            do {
                try Data(config.utf8).write(to: URL(fileURLWithPath: configPath))
            } catch {
                throw HarnessError("cannot write nginx config \(configPath): \(error)")
            }
            let child = try ChildProcess(nginx, ["-p", prefix.path + "/", "-c", configPath, "-e", errorLogPath], cwd: prefix.path)
            switch waitUntilReady(child, port: candidate, timeout: 10) {
            case .ready:
                process = child
                port = candidate
                return
            case .exited(let result):
                let log = (try? String(contentsOfFile: errorLogPath, encoding: .utf8)) ?? ""
                let report = "attempt \(attempt), port \(candidate): nginx exited (\(result.signal.map { "signal \($0)" } ?? "exit code \(result.exitCode)"))\n"
                    + "error log:\n\(tail(log))\nstderr:\n\(tail(result.stderr))"
                failures.append(report)
                // Only a lost port race is worth another try; a config error would fail again.
                guard log.contains("Address already in use") || result.stderr.contains("Address already in use") else {
                    throw HarnessError("nginx did not start (\(nginx) -c \(configPath)):\n" + report + "\nconfig:\n\(config)")
                }
            case .timedOut:
                child.signal(SIGKILL, toGroup: true)
                let result = try? child.wait(timeout: 10)
                let log = (try? String(contentsOfFile: errorLogPath, encoding: .utf8)) ?? ""
                throw HarnessError("nginx did not answer on 127.0.0.1:\(candidate) within 10 s (attempt \(attempt)); error log:\n"
                    + tail(log) + "\nstderr:\n" + tail(result?.stderr ?? ""))
            }
        }
        throw HarnessError("nginx could not bind a free port in 3 attempts:\n" + failures.joined(separator: "\n"))
    }

    deinit { stop() }

    /// Stops nginx (SIGTERM, then SIGKILL to its group if it has not exited within 5 s). Idempotent;
    /// the logs stay readable until the object is released.
    public func stop() {
        guard let child = process else { return }
        process = nil
        child.signal(SIGTERM)
        _ = try? child.wait(timeout: 5)  // On timeout, wait() kills the group and reaps it.
    }

    /// Starts nginx again after ``stop()``, on the same port with the same configuration, so that
    /// URLs a client kept (a manifest URL) work again: the server coming back after an outage.
    public func restart() throws {
        guard process == nil else { return }
        let child = try ChildProcess(try Self.locateNginx(), ["-p", prefix.path + "/", "-c", configPath, "-e", errorLogPath],
                                     cwd: prefix.path)
        guard case .ready = waitUntilReady(child, port: port, timeout: 10) else {
            child.signal(SIGKILL, toGroup: true)
            _ = try? child.wait(timeout: 10)
            throw HarnessError("nginx did not start again on 127.0.0.1:\(port)")
        }
        process = child
    }

    /// True while the nginx process is alive.
    public var isRunning: Bool { process?.isRunning ?? false }

    /// The access log so far, one entry per finished request (the readiness probe is not logged,
    /// the markers of ``settledAccessLog(timeout:)`` are left out).
    public func accessLog() throws -> [AccessLogEntry] {
        try loggedRequests().filter { $0.uri != markerPath }
    }

    /// Every request nginx has finished so far, late lines included, without waiting on a clock:
    /// asks nginx for a marker URL of its own and returns the log once the marker's line is in it.
    ///
    /// Why that proves the earlier lines are written: nginx runs one worker process, one event
    /// loop, and handles events in the order they come. A client that exited before the marker
    /// was sent has closed its connections; nginx notices those closes (and logs what was in
    /// flight on them) no later than the events of the marker's new connection, which takes
    /// another turn of the loop to be read and answered. So a request that ended, or whose client
    /// went away, before this call is in the log once the marker is. A request still in flight
    /// (a client still running, a cache still filling) is not: wait for it to end first.
    /// A stopped server logs nothing more: its log is returned as it is.
    public func settledAccessLog(timeout: Double = 5) throws -> [AccessLogEntry] {
        guard isRunning else { return try accessLog() }
        markers += 1
        let target = "\(markerPath)?n=\(markers)"
        let answer = try Loopback.httpGet(port: port, path: target, timeout: timeout)
        guard answer.status == 200 else { throw HarnessError("nginx answered \(answer.status) to the marker request \(target)") }
        try Wait.until("nginx logged the marker request \(target)", timeout: timeout) {
            try loggedRequests().contains { $0.requestURI == target }
        }
        return try accessLog()
    }

    /// Every line of the access log, markers included.
    private func loggedRequests() throws -> [AccessLogEntry] {
        let text: String
        do {
            text = try String(contentsOfFile: accessLogPath, encoding: .utf8)
        } catch {
            throw HarnessError("cannot read nginx access log \(accessLogPath): \(error)")
        }
        var entries: [AccessLogEntry] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: true).enumerated() {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 12, let status = Int(fields[2]), let bytes = Int64(fields[3]),
                  let connection = Int(fields[7]), let requests = Int(fields[8]),
                  let ended = Double(fields[9]), let duration = Double(fields[10]) else {
                throw HarnessError("nginx access log \(accessLogPath) line \(number + 1) has an unexpected format: \(line.debugDescription)")
            }
            func optional(_ field: String) -> String? { field == "-" ? nil : Self.unescape(field) }
            entries.append(AccessLogEntry(method: Self.unescape(fields[0]), uri: Self.unescape(fields[1]), status: status,
                                          bodyBytesSent: bytes, rangeHeader: optional(fields[4]), ifRange: optional(fields[5]),
                                          requestURI: Self.unescape(fields[6]), connection: connection,
                                          connectionRequests: requests, started: ended - duration, ended: ended,
                                          httpProtocol: fields[11]))
        }
        return entries
    }

    /// The access log once it holds at least `count` entries, polling for at most `timeout` seconds
    /// (then it returns what there is, and the test's own checks report the shortfall). Use it after
    /// a keep-alive client exits: nginx logs a request when it finishes it, which can be a moment
    /// after the client has read the last byte.
    public func waitForAccessLog(count: Int, timeout: Double = 5) throws -> [AccessLogEntry] {
        let deadline = monotonicSeconds() + timeout
        while true {
            let entries = try accessLog()
            if entries.count >= count || monotonicSeconds() >= deadline { return entries }
            sleepSeconds(0.01)
        }
    }

    /// nginx's error log so far (for diagnostics).
    public func errorLog() -> String {
        (try? String(contentsOfFile: errorLogPath, encoding: .utf8)) ?? ""
    }

    // MARK: - Private

    private enum Readiness { case ready, exited(ProcessResult), timedOut }

    private func waitUntilReady(_ child: ChildProcess, port: Int, timeout: Double) -> Readiness {
        let deadline = monotonicSeconds() + timeout
        while monotonicSeconds() < deadline {
            if !child.isRunning {
                if let result = try? child.wait(timeout: 5) { return .exited(result) }
                return .exited(ProcessResult(exitCode: -1, signal: nil, stdout: "", stderr: "", maxRSSKilobytes: 0, wallSeconds: 0))
            }
            if let response = try? Loopback.httpGet(port: port, path: readyPath, timeout: 2),
               response.status == 200, response.body == Array(readyToken.utf8) {
                return .ready
            }
            sleepSeconds(0.02)
        }
        return .timedOut
    }

    private func makeConfig(port: Int) -> String {
        func q(_ path: String) -> String {
            "\"" + path.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        var server = ""
        if let rate = options.limitRate { server += "        limit_rate \(rate);\n" }
        if let ranges = options.maxRanges { server += "        max_ranges \(ranges);\n" }
        return """
        # Generated by MirrorTestSupport.NginxServer.
        daemon off;
        master_process off;
        worker_processes 1;
        pid \(q(prefix.path("nginx.pid")));
        lock_file \(q(prefix.path("nginx.lock")));
        error_log \(q(errorLogPath)) info;
        events { worker_connections 256; }
        http {
            log_format harness '$request_method\\t$uri\\t$status\\t$body_bytes_sent\\t$http_range\\t$http_if_range\\t$request_uri\\t$connection\\t$connection_requests\\t$msec\\t$request_time\\t$server_protocol';
            access_log \(q(accessLogPath)) harness;
            client_body_temp_path \(q(prefix.path("client_body")));
            proxy_temp_path \(q(prefix.path("proxy")));
            fastcgi_temp_path \(q(prefix.path("fastcgi")));
            uwsgi_temp_path \(q(prefix.path("uwsgi")));
            scgi_temp_path \(q(prefix.path("scgi")));
            types { application/octet-stream bin; }
            default_type application/octet-stream;
            sendfile on;
        \(options.extraHTTPConfig)
            server {
                listen 127.0.0.1:\(port);
                root \(q(root));
                etag on;
        \(server)
                location / {
        \(options.extraLocationConfig)
                }
                location = \(readyPath) {
                    access_log off;
                    default_type text/plain;
                    return 200 "\(readyToken)";
                }
                location = \(markerPath) {
                    default_type text/plain;
                    return 200 "marker";
                }
        \(options.extraServerConfig)
            }
        }

        """
    }

    /// Reverses nginx's default log escaping (`\xHH` for `"`, `\`, control and non-ASCII bytes).
    static func unescape(_ field: String) -> String {
        guard field.contains("\\x") else { return field }
        let bytes = Array(field.utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "\\"), i + 3 < bytes.count, bytes[i + 1] == UInt8(ascii: "x"),
               let value = UInt8(String(decoding: bytes[(i + 2)...(i + 3)], as: UTF8.self), radix: 16) {
                out.append(value)
                i += 4
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func locateNginx() throws -> String {
        var candidates = ["/usr/sbin/nginx"]
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        candidates += path.split(separator: ":").map { "\($0)/nginx" }
        for candidate in candidates where access(candidate, X_OK) == 0 {
            return candidate
        }
        throw HarnessError("nginx not found: run scripts/setup")
    }
}
