#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The HTTP/1.1 text handling of ``FaultServer``: request parsing, byte ranges, dates.
///
/// Kept apart from the socket code so the rules are easy to review against RFC 9110/9112. The parser
/// is strict where leniency could hide a client bug (a malformed request line or header is a 400, not
/// a guess) and follows the RFCs' "ignore" rules for Range (an invalid Range is ignored, not refused).
enum FaultHTTP {
    /// Largest request head accepted (request line plus headers). A larger head is answered 400 and
    /// the connection closed, so a runaway client cannot make the server buffer without bound.
    static let maxHeadBytes = 64 * 1024
    /// Largest request body read (and discarded); GET and HEAD have none in practice.
    static let maxRequestBody = 1 << 20

    struct Request {
        var method: String
        var target: String
        var path: String
        var version: String
        /// Lowercased names; repeated fields joined with ", ".
        var headers: [String: String]
        var contentLength: Int
    }

    enum ParseError: Error {
        /// Answer with this status and close the connection; `method`/`path`/`version` hold what
        /// could be read, for the request log.
        case bad(status: Int, reason: String, method: String, path: String, version: String)
    }

    /// RFC 9110 `tchar`.
    static func isTokenChar(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(c)
        }
    }

    /// Finds the end of a request head: the index of the empty line's terminator start and the
    /// index where the body starts. Accepts CRLF and bare LF line ends (RFC 9112 §2.2 allows a
    /// recipient to accept LF).
    static func headEnd(_ buffer: [UInt8]) -> (head: Int, body: Int)? {
        var i = 0
        let n = buffer.count
        while i < n {
            if buffer[i] == 10 {
                if i + 1 < n && buffer[i + 1] == 10 { return (i, i + 2) }
                if i + 2 < n && buffer[i + 1] == 13 && buffer[i + 2] == 10 { return (i, i + 3) }
            }
            i += 1
        }
        return nil
    }

    /// Parses a request head (everything before the empty line).
    static func parseHead(_ head: ArraySlice<UInt8>) throws -> Request {
        var lines: [ArraySlice<UInt8>] = head.split(separator: 10, omittingEmptySubsequences: false).map { line in
            line.last == 13 ? line.dropLast() : line
        }
        // A trailing LF before the terminator leaves an empty last element.
        while let last = lines.last, last.isEmpty { lines.removeLast() }
        guard let requestLine = lines.first else {
            throw ParseError.bad(status: 400, reason: "empty request", method: "", path: "", version: "")
        }
        let parts = requestLine.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw ParseError.bad(status: 400, reason: "request line must be METHOD SP target SP version",
                                 method: "", path: "", version: "")
        }
        let methodBytes = parts[0], targetBytes = parts[1], versionBytes = parts[2]
        guard !methodBytes.isEmpty, methodBytes.allSatisfy(isTokenChar) else {
            throw ParseError.bad(status: 400, reason: "bad method", method: "", path: "", version: "")
        }
        let method = String(decoding: methodBytes, as: UTF8.self)
        guard !targetBytes.isEmpty, targetBytes.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw ParseError.bad(status: 400, reason: "bad request target", method: method, path: "", version: "")
        }
        let target = String(decoding: targetBytes, as: UTF8.self)
        let path = pathOf(target)
        let version = String(decoding: versionBytes, as: UTF8.self)
        let v = Array(versionBytes)
        func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }
        guard v.count == 8, v[0..<5].elementsEqual("HTTP/".utf8), isDigit(v[5]), v[6] == UInt8(ascii: "."), isDigit(v[7]) else {
            throw ParseError.bad(status: 400, reason: "bad HTTP version", method: method, path: path, version: "")
        }
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            throw ParseError.bad(status: 505, reason: "unsupported HTTP version", method: method, path: path, version: version)
        }
        guard path.hasPrefix("/") || target == "*" else {
            throw ParseError.bad(status: 400, reason: "request target is not a path", method: method, path: path, version: version)
        }

        var headers: [String: String] = [:]
        var hostCount = 0
        var contentLengths: Set<String> = []
        for line in lines.dropFirst() {
            func bad(_ reason: String) -> ParseError {
                .bad(status: 400, reason: reason, method: method, path: path, version: version)
            }
            guard let first = line.first else { throw bad("empty header line") }
            // obs-fold (RFC 9112 §5.2): a server may reject it; we do, so clients are kept honest.
            if first == UInt8(ascii: " ") || first == 9 { throw bad("obsolete line folding") }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw bad("header line without colon") }
            let nameBytes = line[line.startIndex..<colon]
            guard !nameBytes.isEmpty, nameBytes.allSatisfy(isTokenChar) else { throw bad("bad header name") }
            var valueBytes = line[line.index(after: colon)...]
            while let c = valueBytes.first, c == 32 || c == 9 { valueBytes = valueBytes.dropFirst() }
            while let c = valueBytes.last, c == 32 || c == 9 { valueBytes = valueBytes.dropLast() }
            guard valueBytes.allSatisfy({ $0 == 9 || ($0 >= 0x20 && $0 != 0x7f) }) else {
                throw bad("control character in header value")
            }
            let name = String(decoding: nameBytes, as: UTF8.self).lowercased()
            let value = String(decoding: valueBytes, as: UTF8.self)
            if name == "host" { hostCount += 1 }
            if name == "content-length" { contentLengths.insert(value) }
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
        func bad(_ reason: String) -> ParseError {
            .bad(status: 400, reason: reason, method: method, path: path, version: version)
        }
        // RFC 9112 §3.2: an HTTP/1.1 request without exactly one Host is a 400.
        if version == "HTTP/1.1" && hostCount != 1 { throw bad("HTTP/1.1 request needs exactly one Host header") }
        if hostCount > 1 { throw bad("more than one Host header") }
        if headers["transfer-encoding"] != nil { throw bad("request bodies with Transfer-Encoding are not supported") }
        var contentLength = 0
        if !contentLengths.isEmpty {
            guard contentLengths.count == 1, let text = contentLengths.first, !text.isEmpty,
                  text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                  let n = Int(text), n <= maxRequestBody else {
                throw bad("bad or too large request Content-Length")
            }
            contentLength = n
        }
        return Request(method: method, target: target, path: path, version: version, headers: headers,
                       contentLength: contentLength)
    }

    /// The path of a request target: origin-form without its query, or the path of an absolute-form
    /// target (`http://host/path?q`).
    static func pathOf(_ target: String) -> String {
        var rest = Substring(target)
        if let scheme = rest.range(of: "://"), !rest.hasPrefix("/") {
            rest = rest[scheme.upperBound...]
            if let slash = rest.firstIndex(of: "/") { rest = rest[slash...] } else { rest = "/" }
        }
        if let question = rest.firstIndex(of: "?") { rest = rest[..<question] }
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        return String(rest)
    }

    /// True when the connection should stay open after the response (RFC 9112 §9.3): HTTP/1.1
    /// unless `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`.
    static func wantsKeepAlive(_ request: Request) -> Bool {
        let options = (request.headers["connection"] ?? "").lowercased()
            .split(separator: ",").map { $0.faultTrimmed }
        if options.contains("close") { return false }
        if request.version == "HTTP/1.1" { return true }
        return options.contains("keep-alive")
    }

    // MARK: Ranges

    enum RangeSpec: Equatable {
        case from(Int64)
        case fromTo(Int64, Int64)
        case suffix(Int64)
    }

    enum RangeResolution: Equatable {
        case range(start: Int64, end: Int64)
        case unsatisfiable
    }

    /// Parses a Range value holding one byte range. Returns nil for anything else (another unit,
    /// several ranges, bad syntax, numbers that overflow): RFC 9110 §14.2 lets a server ignore such
    /// a Range and send 200, which is what the honest server then does.
    static func parseRange(_ value: String) -> RangeSpec? {
        let trimmed = value.faultTrimmed
        guard trimmed.lowercased().hasPrefix("bytes=") else { return nil }
        let spec = trimmed.dropFirst(6).faultTrimmed
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        let first = String(spec[..<dash]).faultTrimmed
        let last = String(spec[spec.index(after: dash)...]).faultTrimmed
        func number(_ text: String) -> Int64? {
            guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
            return Int64(text)
        }
        if first.isEmpty {
            guard let k = number(last) else { return nil }
            return .suffix(k)
        }
        guard let start = number(first) else { return nil }
        if last.isEmpty { return .from(start) }
        guard let end = number(last), end >= start else { return nil }
        return .fromTo(start, end)
    }

    /// Applies a range to a representation of `total` bytes (RFC 9110 §14.1.2): the end is clamped
    /// to the last byte; a first byte at or after the end, or a zero-length suffix, cannot be
    /// satisfied (416).
    static func resolve(_ spec: RangeSpec, total: Int64) -> RangeResolution {
        switch spec {
        case .from(let start):
            return start < total ? .range(start: start, end: total - 1) : .unsatisfiable
        case .fromTo(let start, let end):
            return start < total ? .range(start: start, end: min(end, total - 1)) : .unsatisfiable
        case .suffix(let length):
            guard length > 0, total > 0 else { return .unsatisfiable }
            return .range(start: max(0, total - length), end: total - 1)
        }
    }

    // MARK: Dates and text

    /// An IMF-fixdate (RFC 9110 §5.6.7), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func httpDate(_ seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let day = days[Int(parts.tm_wday) % 7]
        let month = months[Int(parts.tm_mon) % 12]
        return "\(day), \(two(parts.tm_mday)) \(month) \(parts.tm_year + 1900) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 206: return "Partial Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 303: return "See Other"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 410: return "Gone"
        case 416: return "Range Not Satisfiable"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        default: return "Status \(status)"
        }
    }

    /// A small HTML page for error and redirect responses (like a real server's), so a client that
    /// saves error bodies as file content would be caught by the checksum.
    static func htmlPage(_ status: Int, _ detail: String = "") -> [UInt8] {
        let title = "\(status) \(reasonPhrase(status))"
        let escaped = detail.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
        return Array("<html><head><title>\(title)</title></head><body><h1>\(title)</h1>\(escaped.isEmpty ? "" : "<p>\(escaped)</p>")</body></html>\n".utf8)
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs (HTTP's OWS).
    var faultTrimmed: String {
        var bytes = Substring(self).utf8[...]
        while let c = bytes.first, c == 32 || c == 9 { bytes = bytes.dropFirst() }
        while let c = bytes.last, c == 32 || c == 9 { bytes = bytes.dropLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
