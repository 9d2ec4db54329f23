import CCurl
import MirrorFS
#if canImport(Glibc)
import Glibc
#endif

/// Why an entry failed, as a value: what `--summary` groups its failures by (docs/cli.md,
/// "Output"). Built from the typed failure (``TransferFailure``, ``SystemError``, the planner's
/// refusal), never read back from a message's words: two messages of one cause differ in their
/// paths, sizes and digests, and a changed wording must not split or merge groups.
public enum FailureCause: Hashable, Sendable {
    /// The server answered with this error status.
    case httpStatus(Int)
    case unreachable
    case stalled
    /// libcurl's error code (0: a failure of the transfer that libcurl did not number).
    case network(code: Int32)
    /// The bytes were not the manifest's, after the retries ``MismatchPolicy`` allows.
    case checksumMismatch
    /// The server still holds the file an earlier run refused (``RefusedBook``): not downloaded.
    case refusedBefore
    case lengthMismatch
    case tooMuchData
    case shortBody
    case badContentRange
    case rangeIgnored
    case validatorChanged
    case contentEncoding
    /// A call on this machine failed with this `errno` (a partial file, a check of a found file).
    case system(code: Int32)
    /// Something that is not the entry's file is in the way at its path (``PlannedAction/blocked(_:)``).
    case blocked
    /// `--delete`: a file could not be removed (`errno` when the error said one).
    case cannotDelete(code: Int32?)
    /// The run stopped before the entry finished.
    case stopped
    /// An error of no type above.
    case other

    public init(_ failure: TransferFailure) {
        switch failure {
        case .httpStatus(let code, _): self = .httpStatus(code)
        case .unreachable: self = .unreachable
        case .stalled: self = .stalled
        case .network(let code, _, _): self = .network(code: code)
        case .checksumMismatch: self = .checksumMismatch
        case .lengthMismatch: self = .lengthMismatch
        case .tooMuchData: self = .tooMuchData
        case .shortBody: self = .shortBody
        case .badContentRange: self = .badContentRange
        case .rangeIgnored: self = .rangeIgnored
        case .validatorChanged: self = .validatorChanged
        case .contentEncoding: self = .contentEncoding
        case .writeFailed(let error): self = .system(code: error.code)
        case .cancelled: self = .stopped
        }
    }

    /// An error thrown on this machine: its `errno` when it is a ``SystemError``.
    public init(_ error: Error) {
        if let error = error as? SystemError {
            self = .system(code: error.code)
        } else if let failure = error as? TransferFailure {
            self.init(failure)
        } else {
            self = .other
        }
    }

    /// Whether the cause lies with a server, so that its host is worth naming.
    public var isRemote: Bool {
        switch self {
        case .system, .blocked, .cannotDelete, .stopped, .other: return false
        default: return true
        }
    }

    /// The cause in plain words, the same for every failure of the group.
    public var words: String {
        switch self {
        case .httpStatus(let code): return TransferFailure.httpStatus(code, retryAfter: nil).description
        case .unreachable: return "cannot reach the server"
        case .stalled: return "the server sent no data after the connection opened (stalled)"
        case .network(let code):
            guard code > 0, let text = curl_easy_strerror(CURLcode(rawValue: UInt32(code))) else { return "network error" }
            return "network error: \(String(cString: text)) (libcurl error \(code))"
        case .checksumMismatch: return "checksum mismatch"
        case .refusedBefore: return "the server still holds the file refused before (not downloaded again)"
        case .lengthMismatch: return "the server's size differs from the manifest's"
        case .tooMuchData: return "the server sent more than the manifest's size"
        case .shortBody: return "the transfer ended before the file was complete"
        case .badContentRange: return "the server sent a wrong Content-Range"
        case .rangeIgnored: return "the server ignored a range request"
        case .validatorChanged: return "the file changed on the server during the download"
        case .contentEncoding: return "the server sent an encoded body (Content-Encoding)"
        case .system(let code): return "cannot read or write on this machine: \(String(cString: strerror(code)))"
        case .blocked: return "blocked at its path (something else is in the way, or the path cannot be checked)"
        case .cannotDelete(let code): return "cannot delete" + (code.map { ": \(String(cString: strerror($0)))" } ?? "")
        case .stopped: return "stopped before completion"
        case .other: return "other errors"
        }
    }
}
