import CCurl
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// One small file fetched whole into memory, bounded: a remote manifest and its signature
/// (``RemoteManifest``), a chunk index (``EntryWork``'s deltas). The same transfer settings as
/// every download (``TransferSettings/configure(_:url:)``: schemes, redirects, TLS, credentials,
/// timeouts, proxies); a SIGINT or SIGTERM aborts it.
enum SmallFetch {

    struct Validators: Equatable {
        /// The URL they belong to, user-info masked (credentials are never stored).
        var url: String
        var etag: String?
        var lastModified: String?
    }

    struct Response {
        var status: Int
        var body: [UInt8]
        var etag: String?
        var lastModified: String?
        /// 200, or a `file:` URL that was read (status 0).
        var isSuccess: Bool { status == 200 || status == 0 }
    }

    enum Failure: Error, CustomStringConvertible {
        case curl(String)
        case tooLarge(Int)
        case interrupted
        var description: String {
            switch self {
            case .curl(let message): return redactingURLs(in: message)
            case .tooLarge(let limit): return "larger than \(Formatting.bytes(Int64(limit)))"
            case .interrupted: return "interrupted"
            }
        }
    }

    /// One blocking request with `curl_easy_perform` (no multi handle: the caller waits for this
    /// small file before anything depends on it). HTTP statuses are returned, not thrown; libcurl
    /// errors are thrown.
    ///
    /// - Parameters:
    ///   - stopAt: a monotonic time (``monotonicSeconds()``) at which the fetch is abandoned like
    ///     on a signal (a run's `--deadline`, for a fetch made while the run goes on).
    ///   - timeLimit: seconds the whole request may take (`CURLOPT_TIMEOUT`), beyond the stall rule.
    ///   - revalidate: ask every cache on the way to check with the origin before it answers
    ///     (``CacheRevalidation``, RFC 9111 §5.2.1.4): a cache that may serve what it stored
    ///     without asking must not answer for a file whose newest version matters.
    static func get(_ url: String, validators: Validators?, limit: Int, settings: TransferSettings,
                    stopAt: Double? = nil, timeLimit: Int? = nil, revalidate: Bool = false) throws -> Response {
        let easy: CurlEasy
        do { easy = try CurlEasy() } catch { throw Failure.curl("\(error)") }
        let sink = FetchSink(limit: limit)
        sink.stopAt = stopAt
        let userdata = Unmanaged.passUnretained(sink).toOpaque()
        do {
            // The same schemes, redirects, TLS (`--ca-file`), credentials and timeouts as every download.
            var headers = try settings.configure(easy, url: url)
            try easy.set(CURLOPT_ACCEPT_ENCODING, "gzip")
            if let etag = validators?.etag { headers.append("If-None-Match: \(etag)") }
            if let date = validators?.lastModified { headers.append("If-Modified-Since: \(date)") }
            headers += CacheRevalidation.headerLines(revalidate: revalidate, url: url)
            if !headers.isEmpty { try easy.setHeaders(headers) }
            try easy.set(CURLOPT_HEADERFUNCTION, callback: fetchHeaderCallback)
            try easy.set(CURLOPT_HEADERDATA, pointer: userdata)
            try easy.set(CURLOPT_WRITEFUNCTION, callback: fetchWriteCallback)
            try easy.set(CURLOPT_WRITEDATA, pointer: userdata)
            // The progress callback is where a SIGINT/SIGTERM during the fetch is noticed.
            try easy.set(CURLOPT_NOPROGRESS, 0)
            _ = mirror_curl_easy_setopt_xferinfo_callback(easy.handle, fetchProgressCallback)
            try easy.set(CURLOPT_XFERINFODATA, pointer: userdata)
            if let timeLimit { try easy.set(CURLOPT_TIMEOUT, max(1, timeLimit)) }
        } catch {
            throw Failure.curl("\(error)")
        }
        let code = withExtendedLifetime(sink) { curl_easy_perform(easy.handle) }
        if sink.overflowed { throw Failure.tooLarge(limit) }
        if code == CURLE_ABORTED_BY_CALLBACK { throw Failure.interrupted }
        guard code == CURLE_OK else { throw Failure.curl(easy.message(for: code)) }
        return Response(status: easy.responseCode, body: sink.body, etag: sink.headers["etag"],
                        lastModified: sink.headers["last-modified"])
    }
}

/// Collects one fetch's body (bounded) and the validator headers of its last response.
private final class FetchSink {
    let limit: Int
    var body: [UInt8] = []
    var headers: [String: String] = [:]
    var overflowed = false
    /// Monotonic time at which the fetch gives up (see ``SmallFetch/get(_:validators:limit:settings:stopAt:timeLimit:)``).
    var stopAt: Double?
    init(limit: Int) { self.limit = limit }
}

private func fetchSink(_ userdata: UnsafeMutableRawPointer?) -> FetchSink? {
    userdata.map { Unmanaged<FetchSink>.fromOpaque($0).takeUnretainedValue() }
}

/// `CURLOPT_HEADERFUNCTION`: a status line starts a new response (after a redirect), so earlier
/// headers are dropped; `ETag` and `Last-Modified` are kept.
private func fetchHeaderCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                                 _ userdata: UnsafeMutableRawPointer?) -> Int {
    let n = size * count
    guard let data, let sink = fetchSink(userdata) else { return 0 }
    let line = String(decoding: UnsafeRawBufferPointer(start: data, count: n), as: UTF8.self)
    if line.hasPrefix("HTTP/") {
        sink.headers = [:]
    } else if let colon = line.firstIndex(of: ":") {
        let name = line[..<colon].lowercased()
        if name == "etag" || name == "last-modified" {
            sink.headers[name] = String(line[line.index(after: colon)...]).trimmingSpaces
        }
    }
    return n
}

/// `CURLOPT_WRITEFUNCTION`: appends, or aborts (returns 0) past the size limit.
private func fetchWriteCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                                _ userdata: UnsafeMutableRawPointer?) -> Int {
    let n = size * count
    guard let data, let sink = fetchSink(userdata) else { return 0 }
    if sink.body.count + n > sink.limit {
        sink.overflowed = true
        return 0
    }
    sink.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: n))
    return n
}

/// `CURLOPT_XFERINFOFUNCTION`: non-zero aborts the transfer (`CURLE_ABORTED_BY_CALLBACK`).
private func fetchProgressCallback(_ userdata: UnsafeMutableRawPointer?, _ dltotal: curl_off_t, _ dlnow: curl_off_t,
                                   _ ultotal: curl_off_t, _ ulnow: curl_off_t) -> Int32 {
    if StopSignal.received != 0 { return 1 }
    if let stopAt = fetchSink(userdata)?.stopAt, monotonicSeconds() >= stopAt { return 1 }
    return 0
}
