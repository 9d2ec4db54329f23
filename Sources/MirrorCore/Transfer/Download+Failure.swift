import CCurl

/// What a libcurl result code means for the retry logic (``RetryPolicy``).
extension Download {
    /// Sorts libcurl's result codes into what the retry logic needs to know.
    ///
    /// `connected`: whether this transfer's TCP connect completed (``CurlEasy/connectMicroseconds``).
    /// A timeout before it did (`CURLE_OPERATION_TIMEDOUT` from `CURLOPT_CONNECTTIMEOUT`: SYNs
    /// dropped by a firewall or a full accept queue) is a host that cannot be reached, like a
    /// refused one, so the runner stops sending it connections (docs/faults.md); a timeout after
    /// it with not one body byte written (`stalledAfter`: the stall timeout, nil once a byte came)
    /// is a server that took the connection and said nothing: ``TransferFailure/stalled(seconds:)``,
    /// counted like an unreachable host (docs/cli.md, "Retries": five retries of 30 s stalls, with their
    /// back-offs, held a run 4 min 16 s with no sign). A timeout after some bytes (a stall
    /// mid-body) is transient: the retry resumes where the bytes stopped.
    static func classify(_ code: CURLcode, connected: Bool, message: String, stalledAfter: Int? = nil) -> TransferFailure {
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT:
            return .unreachable(message)
        case CURLE_OPERATION_TIMEDOUT where !connected:
            return .unreachable(message)
        case CURLE_OPERATION_TIMEDOUT where stalledAfter != nil:
            return .stalled(seconds: stalledAfter ?? 0)
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_TOO_MANY_REDIRECTS, CURLE_URL_MALFORMAT,
             CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CACERT_BADFILE,
             CURLE_FILE_COULDNT_READ_FILE, CURLE_LOGIN_DENIED, CURLE_REMOTE_ACCESS_DENIED:
            return .network(code: Int32(code.rawValue), message: message, transient: false)
        case CURLE_ABORTED_BY_CALLBACK:
            return .cancelled
        default:
            // Timeouts, resets, truncated bodies (CURLE_PARTIAL_FILE), HTTP/2 stream errors...
            return .network(code: Int32(code.rawValue), message: message, transient: true)
        }
    }
}
