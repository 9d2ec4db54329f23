/// One misbehaviour of ``FaultServer`` for one URL path.
///
/// Why an enum of named faults rather than hooks: every integration test that exercises a failure
/// mode of `mirror` should provoke it the same, reviewed way, and the `FaultServerTests` suite proves
/// that each case does exactly what its name says, so a failing `mirror` test can be blamed on
/// `mirror` rather than on the server.
///
/// Unless a case says otherwise it composes with the honest behaviour (`.none`): Range, If-Range,
/// 416 and HEAD are still handled, and the fault only changes what its description says. Several
/// faults can be combined with ``combined(_:)``.
///
/// Offsets are absolute file offsets (counting from the start of the file, not of the response
/// body), so a fault stays put in the file when a client resumes with a Range.
public enum Fault: Equatable, Sendable {
    /// Honest HTTP/1.1: GET and HEAD, single byte ranges (`bytes=N-`, `bytes=N-M`, `bytes=-K`) with
    /// 206 and an exact Content-Range, If-Range (RFC 9110 §13.1.5, strong comparison only), 416 for
    /// a range starting at or after the end, keep-alive.
    case none

    /// Closes the connection (FIN, after every byte before it has been sent) when the response body
    /// reaches absolute file offset `offset`: a response starting before `offset` delivers the bytes
    /// up to `offset` and then the connection ends. A response that starts at or after `offset`, or
    /// ends before it, is served honestly, so a resuming client makes progress.
    case dropAt(offset: Int64)

    /// Every response whose body is longer than `bytes` closes the connection after `bytes` body
    /// bytes (whatever the range start), so a client needs many resumptions to finish.
    case dropEvery(bytes: Int64)

    /// Sends the headers and `afterBytes` body bytes, then nothing at all, without closing, until
    /// the server stops or the client goes away. Counted per response (from the start of its body,
    /// not of the file): a resumed response stalls again `afterBytes` later, and a body no longer
    /// than `afterBytes` is sent whole, so a client that resumes after each stall still finishes.
    case stall(afterBytes: Int64)

    /// Sends the body in small pieces with pauses so that the rate stays at about `bytesPerSecond`
    /// (for a client's low-speed limit). The pauses end early when the server stops.
    case trickle(bytesPerSecond: Int)

    /// Ignores Range (and If-Range): always 200 with the whole body, and no `Accept-Ranges`.
    case ignoreRange

    /// A 206 response whose `Content-Range` lies (see ``LieKind``). Requests without a satisfiable
    /// range are answered honestly with 200.
    case lieContentRange(LieKind)

    /// Appends this many extra bytes (0x5A) after the real body; Content-Length counts them, so the
    /// framing is valid and the client sees a body longer than the file (or than the range).
    /// Content-Range, on a 206, stays honest.
    case extraBody(Int)

    /// Content-Length announces the full body but `missing` bytes fewer are sent; the connection
    /// then stays open and silent until the server stops or the client goes away (the client has to
    /// time out).
    case truncatedKeepAlive(missing: Int)

    /// XORs with 0xFF the bytes at these absolute file offsets in every response that covers them.
    /// Headers (length, ETag) are unchanged: only a checksum can notice.
    case flipBytes(at: [Int64])

    /// ``flipBytes(at:)``, except in answers to requests that ask caches to revalidate
    /// (`Cache-Control: no-cache`): a cache holding a damaged copy, mended by a revalidation.
    case flipBytesUntilRevalidated(at: [Int64])

    /// The first `requests` requests to the path get the content given to `serve`; later ones get
    /// `to`, with its own ETag and a later Last-Modified (as if the file was replaced on the server).
    case changeAfter(requests: Int, to: [UInt8])

    /// Sends `ETag: W/"..."` and no Last-Modified, so the response has no strong validator and an
    /// If-Range can never match (a client resuming with it always gets 200).
    case weakETag

    /// The first `times` requests to the path are answered with `code` (a small HTML body, and
    /// `Retry-After: retryAfter` when given); later requests are honest. `times: Int.max` means
    /// forever.
    case status(code: Int, times: Int, retryAfter: String?)

    /// Every request is answered with a redirect to `to` (sent verbatim in `Location`).
    case redirect(to: String, status: Int = 302)

    /// Adds `Content-Encoding: gzip` (to 200 and 206) while sending the body unchanged: a client
    /// that must not accept encoded content can only refuse on the header.
    case contentEncodingGzip

    /// `HTTP/1.0 200 OK` with no Content-Length, the whole body delimited by closing the connection
    /// (Range is ignored).
    case http10CloseDelimited

    /// `200` with no Content-Length, close-delimited, sending bytes until the client goes away or
    /// the server stops.
    case endlessBody

    /// Every request with a `Range` header is answered `416` with `Content-Range: bytes */TOTAL`,
    /// no length, and a close-delimited body that never ends (until the client goes away or the
    /// server stops); requests without `Range` are served honestly. A client that reads a 416's
    /// explanation to its end never finishes, and the bytes keep a low-speed limit from firing.
    case endless416

    /// A `302` to `to` with `Content-Length: 10^12` on a kept-alive connection and a body that
    /// never ends: libcurl reads and drops a followed redirect's body before it follows, without
    /// handing it to the write callback, so only a progress check can cut it.
    case endlessRedirect(to: String)

    /// `200` with `Transfer-Encoding: chunked` and the honest whole body (Range is ignored) — a valid
    /// response without a length. An HTTP/1.0 request gets a close-delimited body instead, since
    /// HTTP/1.0 has no chunked coding.
    case noLength

    /// Several faults at once, applied in order where they overlap (the first status, redirect or
    /// framing fault wins; for the faults that cut the body short the earliest cut wins).
    case combined([Fault])

    /// How ``Fault/lieContentRange(_:)`` lies in a 206 for the range `start-end` of a file of
    /// `total` bytes. The body sent is the honest range unless the kind says otherwise.
    public enum LieKind: Equatable, Sendable {
        /// `Content-Range: bytes (start+1)-end/total`, body from `start`.
        case wrongStart
        /// `Content-Range: bytes start-(end-1)/total` (or `end+1` for a one-byte range).
        case wrongEnd
        /// `Content-Range: bytes start-end/(total+1000)`.
        case wrongTotal
        /// A 206 whatever the range, with `Content-Range: bytes 0-(total-1)/total` and the whole body.
        case startsAtZero
    }

    /// The faults as a flat list (``combined(_:)`` expanded, `.none` dropped).
    var flattened: [Fault] {
        switch self {
        case .none: return []
        case .combined(let faults): return faults.flatMap { $0.flattened }
        default: return [self]
        }
    }
}

/// One request as the ``FaultServer`` saw and answered it; logged when its response ended (complete,
/// cut short by a fault, abandoned by the client, or ended by `stop()`).
public struct FaultRequest: Sendable, CustomStringConvertible {
    /// Request method as sent (e.g. `GET`); empty when the request line could not be parsed.
    public let method: String
    /// The request target without its query string, not percent-decoded.
    public let path: String
    /// `HTTP/1.0` or `HTTP/1.1` as sent (empty when unparsable).
    public let version: String
    /// Request headers, names lowercased; repeated headers joined with ", ".
    public let headers: [String: String]
    /// The `Range` header, if any.
    public let rangeHeader: String?
    /// Status code sent (0 when nothing could be sent).
    public let status: Int
    /// Body bytes handed to the kernel (framing excluded). The client may have read fewer if it went
    /// away mid-body.
    public let bodyBytesSent: Int64
    /// Sequence number of the TCP connection (1 for the first accepted connection): requests on the
    /// same keep-alive connection share it.
    public let connectionID: Int

    public var description: String {
        "#\(connectionID) \(method) \(path) \(version) range=\(rangeHeader ?? "-") -> \(status), \(bodyBytesSent) body bytes"
    }
}
