import MirrorKit

/// The status and headers of the final response of one request (after redirects).
public struct ResponseHead: Sendable {
    public var status: Int
    /// Header names lowercased; a repeated header keeps its last value.
    public var headers: [String: String]

    public init(status: Int, headers: [String: String]) {
        self.status = status
        self.headers = headers
    }

    public subscript(name: String) -> String? { headers[name] }

    /// The validator to resume with: a strong ETag, else Last-Modified (RFC 9110 §13.1.5: `If-Range`
    /// must not use a weak entity tag).
    public var resumeValidator: String? {
        if let etag = headers["etag"], !etag.hasPrefix("W/") { return etag }
        return headers["last-modified"]
    }
}

/// What to do with a response, decided from its head before a byte of its body is written.
public enum ResponseVerdict: Equatable, Sendable {
    /// Write the body into the file starting at this offset (0 for a full 200 response).
    case accept(startOffset: Int64)
    /// 416: the server says our range starts past its end; what we hold may already be whole.
    case rangeNotSatisfiable(completeLength: Int64?)
    /// 304 to a conditional request (RFC 9110 §15.4.5): the server's file is still the one the
    /// condition names.
    case notModified
    case reject(TransferFailure)
}

/// The response checks every download passes before its body is written (RFC 9110 §14–15).
public enum ResponseCheck {
    /// - Parameters:
    ///   - requestedOffset: the first byte asked for with `Range: bytes=OFFSET-`, or 0 for no range.
    ///   - requestedEnd: for a segment, the last byte asked for (`Range: bytes=OFFSET-END`, even
    ///     from offset 0); nil when the range runs to the end of the file.
    ///   - expectedSize: the entry's size in the manifest.
    ///   - conditional: the request carried `If-None-Match` or `If-Modified-Since`; a 304 is then
    ///     an answer, not an error.
    public static func verdict(for head: ResponseHead, requestedOffset: Int64, requestedEnd: Int64? = nil,
                               expectedSize: Int64, conditional: Bool = false) -> ResponseVerdict {
        let last = requestedEnd ?? expectedSize - 1
        let ranged = requestedOffset > 0 || requestedEnd != nil
        switch head.status {
        case 200:
            if let failure = checkEncoding(head) { return .reject(failure) }
            if let length = head["content-length"].flatMap(parseLength), length != expectedSize {
                return .reject(.lengthMismatch(server: length, expected: expectedSize))
            }
            // A 200 to a range request is the whole file (§14.2): an If-Range that no longer
            // matches (§13.1.5), or a server without ranges. A segment cannot take it; a resumed
            // stream takes it from byte 0 once the sync thread has had the journal forget the old
            // bytes and cut the file (docs/journal.md, rule 1; ``Download/WholeFile``).
            if ranged { return .reject(.rangeIgnored) }
            return .accept(startOffset: 0)
        case 206:
            guard ranged else {
                return .reject(.badContentRange(head["content-range"] ?? "(none)", expected: "a full response to a request without Range"))
            }
            if let failure = checkEncoding(head) { return .reject(failure) }
            let expected = "bytes \(requestedOffset)-\(last)/\(expectedSize)"
            if let type = head["content-type"], type.lowercased().hasPrefix("multipart/byteranges") {
                return .reject(.badContentRange("multipart/byteranges", expected: expected))
            }
            guard let text = head["content-range"], let range = ContentRange(text),
                  let first = range.first, range.last != nil else {
                return .reject(.badContentRange(head["content-range"] ?? "(none)", expected: expected))
            }
            guard first == requestedOffset, range.last == last, range.completeLength == expectedSize else {
                return .reject(.badContentRange(text, expected: expected))
            }
            if let length = head["content-length"].flatMap(parseLength), length != last + 1 - requestedOffset {
                return .reject(.badContentRange("\(text) with Content-Length \(length)", expected: expected))
            }
            return .accept(startOffset: requestedOffset)
        case 304 where conditional:
            return .notModified
        case 416:
            return .rangeNotSatisfiable(completeLength: head["content-range"].flatMap(ContentRange.init)?.completeLength)
        default:
            let retryAfter = head["retry-after"].flatMap { RetryAfter.seconds(from: $0) }
            return .reject(.httpStatus(head.status, retryAfter: retryAfter))
        }
    }

    /// We never send `Accept-Encoding`, so any coding but identity would put encoded bytes in the file.
    static func checkEncoding(_ head: ResponseHead) -> TransferFailure? {
        guard let coding = head["content-encoding"]?.trimmingSpaces.lowercased(), !coding.isEmpty, coding != "identity" else {
            return nil
        }
        return .contentEncoding(coding)
    }

    static func parseLength(_ text: String) -> Int64? {
        let t = text.trimmingSpaces
        guard !t.isEmpty, t.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return Int64(t)
    }
}

/// A `Content-Range` header value (RFC 9110 §14.4): `bytes FIRST-LAST/COMPLETE`, `bytes */COMPLETE`,
/// or `bytes FIRST-LAST/*`. Numbers that overflow Int64 make the whole value invalid.
public struct ContentRange: Equatable, Sendable {
    public var first: Int64?
    public var last: Int64?
    public var completeLength: Int64?

    public init?(_ text: String) {
        let t = text.trimmingSpaces
        guard t.lowercased().hasPrefix("bytes ") else { return nil }
        let rest = t.dropFirst(6).trimmingPrefixSpaces
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        if parts[1] == "*" {
            completeLength = nil
        } else {
            guard let n = ResponseCheck.parseLength(String(parts[1])) else { return nil }
            completeLength = n
        }
        if parts[0] == "*" {
            guard completeLength != nil else { return nil }
            first = nil
            last = nil
        } else {
            let bounds = parts[0].split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count == 2, let a = ResponseCheck.parseLength(String(bounds[0])),
                  let b = ResponseCheck.parseLength(String(bounds[1])), a <= b else { return nil }
            if let total = completeLength, b >= total { return nil }
            first = a
            last = b
        }
    }
}

extension Substring {
    var trimmingPrefixSpaces: Substring {
        var s = self
        while let c = s.first, c == " " { s.removeFirst() }
        return s
    }
}
