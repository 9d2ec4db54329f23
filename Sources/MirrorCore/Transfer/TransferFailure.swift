import MirrorFS

/// Why one attempt at fetching an entry failed. Each case says whether trying again can help.
public enum TransferFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// The server answered with an error status (404, 503, ...), possibly with `Retry-After`.
    case httpStatus(Int, retryAfter: Double?)
    /// A 206 whose `Content-Range` does not describe exactly the bytes we asked for.
    case badContentRange(String, expected: String)
    /// A 200 with the whole file to a request for one segment: the server does not serve ranges
    /// (RFC 9110 §14.2 lets it ignore them), so the file continues as one stream.
    case rangeIgnored
    /// The server's length for the file differs from the manifest's size.
    case lengthMismatch(server: Int64, expected: Int64)
    /// A `Content-Encoding` other than identity: the bytes would not be the file's bytes.
    case contentEncoding(String)
    /// The body went on past the manifest's size. `ranged`: in a 206, which may be a range bug a
    /// full request avoids; in a full response it is a server that does not have the manifest's file.
    case tooMuchData(limit: Int64, ranged: Bool)
    /// The transfer ended (cleanly, as far as the server said) before the file was complete.
    case shortBody(received: Int64, expected: Int64)
    /// A 206 carried a validator other than the one the partial file was started with.
    case validatorChanged
    /// The host could not be resolved or connected to.
    case unreachable(String)
    /// The connection opened but not one body byte came for the stall timeout (`--stall-timeout`,
    /// libcurl's `CURLE_OPERATION_TIMEDOUT` from `CURLOPT_LOW_SPEED_TIME`): a server that
    /// accepts and then says nothing is as useless as one that refuses, so it counts like one
    /// for marking its host unreachable (``isUnreachable``; docs/cli.md, "Retries").
    case stalled(seconds: Int)
    /// A network or protocol failure reported by libcurl (`curl_easy_strerror`).
    case network(code: Int32, message: String, transient: Bool)
    /// Writing the partial file failed.
    case writeFailed(SystemError)
    /// The whole file arrived but its digest is not the manifest's (`detail`: expected and got).
    /// Another copy may be right: the next source, or the same one again from zero.
    case checksumMismatch(String)
    /// The run is stopping (deadline, signal); not a failure of the entry.
    case cancelled

    /// Whether a later attempt against the same source may succeed.
    public var isTransient: Bool {
        switch self {
        case .httpStatus(let code, _): return code == 408 || code == 425 || code == 429 || (500...599).contains(code)
        case .badContentRange, .shortBody, .validatorChanged, .rangeIgnored: return true
        case .tooMuchData(_, let ranged): return ranged
        case .lengthMismatch, .contentEncoding: return false
        case .unreachable, .stalled, .checksumMismatch: return true
        case .network(_, _, let transient): return transient
        case .writeFailed, .cancelled: return false
        }
    }

    /// True for failures that say something about the source's range support, so the next attempt
    /// should fetch the whole file instead of resuming.
    public var distrustsRanges: Bool {
        switch self {
        case .badContentRange, .tooMuchData, .validatorChanged: return true
        default: return false
        }
    }

    /// The server could not be reached (refused, no route, connect timed out), or it took the
    /// connection and sent no byte of the body (``stalled(seconds:)``).
    public var isUnreachable: Bool {
        switch self {
        case .unreachable, .stalled: return true
        default: return false
        }
    }

    /// A stall without a byte: what the progress display says while the entry waits to retry.
    public var isStall: Bool {
        if case .stalled = self { return true }
        return false
    }

    public var retryAfter: Double? {
        if case .httpStatus(_, let seconds) = self { return seconds }
        return nil
    }

    public var description: String {
        switch self {
        case .httpStatus(let code, _): return "server answered HTTP \(code)\(Self.reason(code))"
        case .badContentRange(let got, let expected): return "server sent Content-Range \(got), expected \(expected)"
        case .lengthMismatch(let server, let expected):
            return "server has \(server) bytes but the manifest says \(expected) (the file changed on the server, or the manifest is out of date)"
        case .rangeIgnored: return "server ignored a range request and sent the whole file"
        case .contentEncoding(let coding): return "server sent Content-Encoding \(coding); only unencoded bodies are accepted"
        case .tooMuchData(let limit, _): return "server sent more than the manifest's \(limit) bytes"
        case .shortBody(let received, let expected): return "transfer ended after \(received) of \(expected) bytes"
        case .validatorChanged: return "the file changed on the server during the download (validator changed)"
        case .unreachable(let message): return "cannot reach the server: \(message)"
        case .stalled(let seconds): return "the server sent no data for \(seconds) s after the connection opened (stalled)"
        case .network(_, let message, _): return message
        case .writeFailed(let error): return error.description
        case .checksumMismatch(let detail): return "checksum mismatch (\(detail))"
        case .cancelled: return "stopped before completion"
        }
    }

    private static func reason(_ code: Int) -> String {
        switch code {
        case 401: return " (Unauthorized)"
        case 403: return " (Forbidden)"
        case 404: return " (Not Found)"
        case 410: return " (Gone)"
        case 429: return " (Too Many Requests)"
        case 500: return " (Internal Server Error)"
        case 502: return " (Bad Gateway)"
        case 503: return " (Service Unavailable)"
        case 504: return " (Gateway Timeout)"
        default: return ""
        }
    }
}
