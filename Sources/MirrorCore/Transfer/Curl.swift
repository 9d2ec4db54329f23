import CCurl
#if canImport(Glibc)
import Glibc
#endif

/// libcurl's process-wide set-up. `curl_global_init` is not thread-safe, so it runs once, before
/// the transfer thread starts; `SIGPIPE` is ignored because a peer closing a socket must be an
/// error code, not the death of the process (libcurl's documentation of `CURLOPT_NOSIGNAL`).
enum CurlGlobal {
    static let initialised: Bool = {
        signal(SIGPIPE, SIG_IGN)
        return curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
    }()
}

/// An error from a libcurl call that is not a transfer result (a bad option, out of memory).
struct CurlSetupError: Error, CustomStringConvertible {
    var what: String
    var description: String { "libcurl: \(what)" }
}

/// Owns one easy handle (`curl_easy_init` / `curl_easy_cleanup`), its header list and its error
/// buffer (`CURLOPT_ERRORBUFFER` must stay valid for the handle's lifetime, so the class owns it).
final class CurlEasy {
    let handle: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>

    init() throws {
        guard CurlGlobal.initialised, let h = curl_easy_init() else { throw CurlSetupError(what: "curl_easy_init failed") }
        handle = h
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        mirror_curl_easy_setopt_ptr(h, CURLOPT_ERRORBUFFER, errorBuffer)
    }

    deinit {
        curl_easy_cleanup(handle)
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    func set(_ option: CURLoption, _ value: Int) throws {
        try check(mirror_curl_easy_setopt_long(handle, option, value), option)
    }

    /// libcurl copies string options (since 7.17.0), so the Swift string need not outlive the call.
    func set(_ option: CURLoption, _ value: String) throws {
        try check(value.withCString { mirror_curl_easy_setopt_ptr(handle, option, $0) }, option)
    }

    func set(_ option: CURLoption, offset value: Int64) throws {
        try check(mirror_curl_easy_setopt_off_t(handle, option, curl_off_t(value)), option)
    }

    func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) throws {
        try check(mirror_curl_easy_setopt_ptr(handle, option, value), option)
    }

    func set(_ option: CURLoption, callback: mirror_curl_data_callback) throws {
        try check(mirror_curl_easy_setopt_data_callback(handle, option, callback), option)
    }

    /// Replaces the request's extra headers (`CURLOPT_HTTPHEADER`); the list is owned here.
    func setHeaders(_ lines: [String]) throws {
        var list: UnsafeMutablePointer<curl_slist>?
        for line in lines {
            guard let appended = curl_slist_append(list, line) else {
                curl_slist_free_all(list)
                throw CurlSetupError(what: "curl_slist_append failed")
            }
            list = appended
        }
        try check(mirror_curl_easy_setopt_ptr(handle, CURLOPT_HTTPHEADER, list), CURLOPT_HTTPHEADER)
        curl_slist_free_all(headerList)
        headerList = list
    }

    /// `CURLINFO_RESPONSE_CODE`: the status of the last response received (0 for `file:`).
    var responseCode: Int {
        var code = 0
        _ = mirror_curl_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    /// `CURLINFO_HTTP_VERSION`: whether the last response came over HTTP/2 or later, on a
    /// connection that carries other requests at once.
    var multiplexed: Bool {
        var version = 0
        _ = mirror_curl_easy_getinfo_long(handle, CURLINFO_HTTP_VERSION, &version)
        return version >= Int(CURL_HTTP_VERSION_2_0)
    }

    /// What one request saw of the link (``LinkSeen``): the seconds from the request sent
    /// (`CURLINFO_PRETRANSFER_TIME_T`) to the first response byte (`CURLINFO_STARTTRANSFER_TIME_T`),
    /// nil when no response came, and the connections it opened (`CURLINFO_NUM_CONNECTS`).
    var linkSample: (firstByteWait: Double?, connectionsOpened: Int) {
        var sent: curl_off_t = 0, first: curl_off_t = 0, opened = 0
        _ = mirror_curl_easy_getinfo_off_t(handle, CURLINFO_PRETRANSFER_TIME_T, &sent)
        _ = mirror_curl_easy_getinfo_off_t(handle, CURLINFO_STARTTRANSFER_TIME_T, &first)
        _ = mirror_curl_easy_getinfo_long(handle, CURLINFO_NUM_CONNECTS, &opened)
        let wait: Double? = first > 0 && first >= sent ? Double(first - sent) / 1_000_000 : nil
        return (wait, max(0, opened))
    }

    /// `CURLINFO_CONNECT_TIME_T`: microseconds from the start of the transfer until its TCP connect
    /// completed; 0 when no connect completed (libcurl records at least 1 µs for one that did,
    /// a reused connection included).
    var connectMicroseconds: Int64 {
        var us: curl_off_t = 0
        _ = mirror_curl_easy_getinfo_off_t(handle, CURLINFO_CONNECT_TIME_T, &us)
        return Int64(us)
    }

    /// The detailed message libcurl left in the error buffer, else `curl_easy_strerror`.
    func message(for code: CURLcode) -> String {
        let detail = String(cString: errorBuffer)
        return detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
    }

    private func check(_ code: CURLcode, _ option: CURLoption) throws {
        guard code == CURLE_OK else {
            throw CurlSetupError(what: "option \(option.rawValue): \(String(cString: curl_easy_strerror(code)))")
        }
    }
}

/// Owns the multi handle (`curl_multi_init` / `curl_multi_cleanup`). Used only on the transfer
/// thread, except ``wakeup()``, which libcurl documents as callable from any thread.
final class CurlMulti {
    let handle: UnsafeMutableRawPointer

    init() throws {
        guard CurlGlobal.initialised, let h = curl_multi_init() else { throw CurlSetupError(what: "curl_multi_init failed") }
        handle = h
    }

    deinit { curl_multi_cleanup(handle) }

    /// `CURLMOPT_MAX_HOST_CONNECTIONS`: at most this many connections to one host (this thread's
    /// share of `--connections`); `CURLMOPT_PIPELINING` with `CURLPIPE_MULTIPLEX`: transfers to
    /// an HTTP/2 server share a connection, up to `streams` at once on each
    /// (`CURLMOPT_MAX_CONCURRENT_STREAMS`, and the server's own `SETTINGS_MAX_CONCURRENT_STREAMS`).
    func limit(connectionsPerHost: Int, streams: Int) {
        _ = mirror_curl_multi_setopt_long(handle, CURLMOPT_MAX_HOST_CONNECTIONS, connectionsPerHost)
        _ = mirror_curl_multi_setopt_long(handle, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = mirror_curl_multi_setopt_long(handle, CURLMOPT_MAX_CONCURRENT_STREAMS, streams)
    }

    func add(_ easy: CurlEasy) throws {
        let code = curl_multi_add_handle(handle, easy.handle)
        guard code == CURLM_OK else { throw CurlSetupError(what: String(cString: curl_multi_strerror(code))) }
    }

    func remove(_ easy: CurlEasy) {
        curl_multi_remove_handle(handle, easy.handle)
    }

    /// `curl_multi_perform`: drives every transfer as far as it goes without blocking.
    func perform() -> Int32 {
        var running: Int32 = 0
        curl_multi_perform(handle, &running)
        return running
    }

    /// `curl_multi_poll`: sleeps until a socket is ready, `timeoutMilliseconds` pass, or ``wakeup()``.
    func poll(timeoutMilliseconds: Int32) {
        var numfds: Int32 = 0
        curl_multi_poll(handle, nil, 0, timeoutMilliseconds, &numfds)
    }

    /// `curl_multi_wakeup`: interrupts a `curl_multi_poll` in progress, from any thread.
    func wakeup() {
        curl_multi_wakeup(handle)
    }

    /// `curl_multi_info_read`: the easy handles that finished, with their result codes.
    func finished() -> [(UnsafeMutableRawPointer, CURLcode)] {
        var out: [(UnsafeMutableRawPointer, CURLcode)] = []
        var queued: Int32 = 0
        while let message = curl_multi_info_read(handle, &queued) {
            if message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle {
                out.append((easy, mirror_curl_msg_result(message)))
            }
        }
        return out
    }
}
