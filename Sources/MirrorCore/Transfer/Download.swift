import CCurl
import MirrorFS
import MirrorKit

/// Settings shared by every request of a run.
public struct TransferSettings: Sendable {
    /// Abort a transfer slower than `lowSpeedLimit` bytes/s for `stallTimeout` seconds
    /// (`CURLOPT_LOW_SPEED_LIMIT` / `CURLOPT_LOW_SPEED_TIME`): a stalled server must not hold the
    /// run until the next cron job starts.
    public var stallTimeout: Int = 30
    public var lowSpeedLimit: Int = 1024
    /// `CURLOPT_CONNECTTIMEOUT`, held to `stallTimeout` when that is shorter: a connect that does
    /// not complete is a transfer that moves no byte, and `--stall-timeout` says how long that
    /// may last.
    public var connectTimeout: Int = 20
    public var maxRedirects: Int = 5
    public var userAgent: String = "mirror/0.1"
    /// Schemes, TLS and credentials (`--ca-file`, `--netrc-file`, `--auth-header-env`).
    public var security = RequestSecurity()
    /// Ask caches on the way to revalidate (``CacheRevalidation``): set for the attempts at a URL
    /// that gave wrong bytes before (``MismatchPolicy``).
    public var revalidate = false

    public init() {}

    /// What every request of a run shares, the downloads and the manifest fetch alike: the URL,
    /// ``RequestSecurity`` (schemes, redirects, TLS, credentials), no signals, the connect and
    /// stall timeouts, the user agent. Returns the header lines the request must carry.
    func configure(_ easy: CurlEasy, url: String) throws -> [String] {
        try easy.set(CURLOPT_URL, url)
        let headers = try security.apply(to: easy, url: url, maxRedirects: maxRedirects)
        try easy.set(CURLOPT_NOSIGNAL, 1)
        try easy.set(CURLOPT_CONNECTTIMEOUT, min(connectTimeout, max(1, stallTimeout)))
        try easy.set(CURLOPT_LOW_SPEED_LIMIT, lowSpeedLimit)
        try easy.set(CURLOPT_LOW_SPEED_TIME, stallTimeout)
        try easy.set(CURLOPT_USERAGENT, userAgent)
        return headers + CacheRevalidation.headerLines(revalidate: revalidate, url: url)
    }
}

/// How one attempt ended, as the sync thread sees it.
public enum DownloadOutcome: Equatable, Sendable {
    /// The file holds exactly the manifest's size in bytes (the checksum is not checked yet).
    case complete
    /// 416: the partial may already be whole; `completeLength` is the server's size, if it said.
    case rangeNotSatisfiable(completeLength: Int64?)
    /// 304 to a request made with a refused file's validator (``Download/init(url:offset:ifRange:target:settings:segment:unlessStill:)``):
    /// the server still holds the file an earlier run refused.
    case notModified
    case failed(TransferFailure)
}

/// One HTTP(S) or file request for one entry: the easy handle, its callbacks and what they saw.
///
/// The callbacks run on the transfer thread and reach this object through `Unmanaged` userdata
/// (`CURLOPT_WRITEDATA`, `CURLOPT_HEADERDATA`); the engine keeps the object alive while the handle
/// is in the multi handle. Every response is checked by ``ResponseCheck`` at the first body byte,
/// before anything is written, so an error page or a wrong range never reaches the file.
public final class Download {
    public let url: String
    public let requestedOffset: Int64
    /// For a segment: its index in the partial file and the last byte asked for.
    public let segment: Int?
    public let requestedEnd: Int64?
    public let target: PartialFile
    /// `scheme://host:port` of ``url``: what the transfer thread counts its requests by
    /// (``ConnectionPolicy/admits(runningForHost:multiplexed:)``).
    let host: String
    /// Body bytes this request wrote into the file.
    public private(set) var bytesWritten: Int64 = 0
    let easy: CurlEasy
    private let isFile: Bool
    /// `--stall-timeout`, to name a stall without a byte (``classify(_:connected:message:stalledAfter:)``).
    private let stallTimeout: Int

    private var headers: [String: String] = [:]
    private var verdict: ResponseVerdict?
    /// Our own reason for aborting; preferred over libcurl's `CURLE_WRITE_ERROR`.
    private var abortReason: TransferFailure?
    /// Bytes of a body that is not the file's (a 416's explanation) read and dropped so far.
    private var discardedBytes = 0
    /// The discarded body went past ``discardedBodyLimit`` and the transfer was cut there: the
    /// status already said everything, so the outcome is the status's, not libcurl's write error.
    private var discardCut = false
    public private(set) var outcome: DownloadOutcome?
    /// What this request saw of the link (``CurlEasy/linkSample``), read once it finished.
    public private(set) var linkSample: (firstByteWait: Double?, connectionsOpened: Int) = (nil, 0)
    /// Set from another thread to stop the transfer at its next callback.
    var cancelled = false

    /// A resume (one stream) the server answered with the whole file, a 200: its validator
    /// changed, so the `If-Range` missed (RFC 9110 §13.1.5), or it has no ranges. The body is
    /// the new file from its first byte, too good to throw away on a slow link; but only the sync
    /// thread journals, and the journal must forget the old bytes before the file is cut
    /// (docs/journal.md, rule 1). So the transfer pauses at the first body byte
    /// (`CURL_WRITEFUNC_PAUSE`, libcurl keeps the bytes and hands them over again), is handed to
    /// the sync thread as an offer (``offersWholeFile``), and goes on from byte 0 once that thread
    /// has cut the file (``TransferEngine/acceptWholeFile(_:)``). docs/faults.md, "resume".
    enum WholeFile { case none, offered, accepted }
    /// Transfer thread only, but for ``offersWholeFile``, read by the sync thread after the
    /// offer's delivery and before it accepts (each hand-off under a lock).
    private(set) var wholeFile = WholeFile.none
    /// The whole file's validator, adopted when it is accepted.
    private var offeredValidator: String?
    /// Delivered to the sync thread as an offer: the transfer is paused, not finished.
    public var offersWholeFile: Bool { outcome == nil && wholeFile == .offered }
    /// `--limit-rate`: the run's bucket, set by the engine (transfer thread only).
    var limiter: RateLimiter?
    /// Called once, on the transfer thread, when the transfer pauses on a whole-file offer: the
    /// engine hands it to the sync thread at the end of its turn. Set by the engine.
    var engineNotice: ((Download) -> Void)?

    /// - Parameters:
    ///   - offset: ask for bytes from here on (`Range: bytes=OFFSET-`); must equal `target.length`.
    ///   - ifRange: the validator of the bytes we hold, sent as `If-Range` (RFC 9110 §13.1.5) so a
    ///     server whose file changed answers 200 with the new file instead of mixing two versions.
    ///   - segment: fetch only segment `index` of a segmented partial file, bytes `offset..<end`
    ///     (`Range: bytes=OFFSET-(END-1)`), checked by ``ResponseCheck`` against exactly that range.
    /// - `unlessStill`: the conditional header of a refused file (``RefusedSource/conditionalHeader``),
    ///   for a request from offset 0: a 304 then ends it as ``DownloadOutcome/notModified``.
    public init(url: String, offset: Int64, ifRange: String?, target: PartialFile, settings: TransferSettings,
                segment: (index: Int, end: Int64)? = nil, unlessStill condition: String? = nil) throws {
        self.url = url
        requestedOffset = offset
        self.segment = segment?.index
        requestedEnd = segment.map { $0.end - 1 }
        self.target = target
        host = hostKey(of: url)
        isFile = url.lowercased().hasPrefix("file:")
        stallTimeout = settings.stallTimeout
        self.condition = isFile || offset > 0 || segment != nil ? nil : condition
        easy = try CurlEasy()
        try configure(ifRange: ifRange, settings: settings)
    }

    /// The refused file's condition sent with this request, if any.
    let condition: String?

    private func configure(ifRange: String?, settings: TransferSettings) throws {
        var headerLines = try settings.configure(easy, url: url)
        if let condition { headerLines.append(condition) }
        try easy.set(CURLOPT_BUFFERSIZE, Download.receiveBufferSize(expecting: expectedBody))
        // No CURLOPT_ACCEPT_ENCODING: we want the file's own bytes, and refuse any other coding.
        // A segment asks for its own end; a resume for the rest of the file. CURLOPT_HTTPHEADER
        // replaces the whole list, so If-Range joins the security headers in one call.
        if !isFile && (requestedEnd != nil || requestedOffset > 0) {
            try easy.set(CURLOPT_RANGE, "\(requestedOffset)-" + (requestedEnd.map(String.init) ?? ""))
            if let ifRange { headerLines.append("If-Range: \(ifRange)") }
        }
        if !headerLines.isEmpty { try easy.setHeaders(headerLines) }
        switch ConnectionPolicy.use(segment: requestedEnd != nil, url: url) {
        case .ownConnection: try easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
        case .waitForMultiplexing: try easy.set(CURLOPT_PIPEWAIT, 1)
        case .any: break
        }
        let me = Unmanaged.passUnretained(self).toOpaque()
        try easy.set(CURLOPT_HEADERFUNCTION, callback: downloadHeaderCallback)
        try easy.set(CURLOPT_HEADERDATA, pointer: me)
        try easy.set(CURLOPT_WRITEFUNCTION, callback: downloadWriteCallback)
        try easy.set(CURLOPT_WRITEDATA, pointer: me)
        // The progress callback watches the body libcurl reads without handing it over: a
        // followed redirect's (see ``receiveProgress(received:)``).
        try easy.set(CURLOPT_NOPROGRESS, 0)
        try easy.set(CURLOPT_XFERINFODATA, pointer: me)
        if mirror_curl_easy_setopt_xferinfo_callback(easy.handle, downloadProgressCallback) != CURLE_OK {
            throw CurlSetupError(what: "cannot set CURLOPT_XFERINFOFUNCTION")
        }
    }

    /// Bytes this request should bring: the rest of the file, or of the segment.
    private var expectedBody: Int64 { (requestedEnd.map { $0 + 1 } ?? target.identity.size) - requestedOffset }

    /// `CURLOPT_BUFFERSIZE` for a body of `expected` bytes: 256 KiB, which halves the write
    /// callbacks and system calls of a large file against libcurl's 16 KiB, or, when the body is
    /// smaller, the body and 16 KiB for the response header, rounded up to 16 KiB: one read and
    /// one write still take a small file whole. libcurl allocates the buffer per easy handle, and
    /// a 256 KiB `malloc` and `free` for every 16 KiB file cost glibc a `malloc_consolidate` each
    /// time (2 % of a 5000-file run in `perf`).
    static func receiveBufferSize(expecting expected: Int64) -> Int {
        let large: Int64 = 256 * 1024, step: Int64 = 16 * 1024
        guard expected < large - step else { return Int(large) }  // and no overflow near Int64.max
        let wanted = max(0, expected) + step
        return Int((wanted + step - 1) / step * step)
    }

    /// libcurl reads the body of a redirect it follows and drops it, without calling the write
    /// callback (libcurl 7.88: `curl -L` read 12 GB of a 302 with `Content-Length: 10^12` in
    /// 4 s), so neither the 64 KiB cap on discarded bodies nor the low-speed limit can end it.
    /// While no response body has reached us and the response being read is a 3xx, more than
    /// ``discardedBodyLimit`` bytes end the transfer (`CURLOPT_XFERINFOFUNCTION` returning
    /// non-zero: `CURLE_ABORTED_BY_CALLBACK`).
    fileprivate func receiveProgress(received: Int64) -> Bool {
        if cancelled { return false }
        guard verdict == nil, received > Int64(Download.discardedBodyLimit), (300...399).contains(easy.responseCode) else { return true }
        abortReason = .network(code: Int32(CURLE_ABORTED_BY_CALLBACK.rawValue),
                               message: "a redirect (HTTP \(easy.responseCode)) sent more than \(Download.discardedBodyLimit / 1024) KiB of body", transient: false)
        return false
    }

    // MARK: - Callbacks (transfer thread)

    /// One header line. A status line starts a new response (a redirect, or an interim 1xx), so
    /// the headers collected so far belong to an earlier response and are dropped.
    fileprivate func receiveHeader(_ line: UnsafeRawBufferPointer) -> Bool {
        if cancelled { return false }
        switch Download.parseHeaderLine(line) {
        case .statusLine: headers = [:]
        case .kept(let name, let value): headers[name] = value
        case .ignored: break
        }
        return true
    }

    /// A piece of the body: decide on the response the first time, then write within bounds.
    fileprivate func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if cancelled {
            abortReason = .cancelled
            return false
        }
        if verdict == nil { decide() }
        if wholeFile == .offered { return false }
        switch verdict {
        case .accept:
            break
        case .rangeNotSatisfiable, .notModified:
            // An explanatory body; nothing of it goes into the file. Bytes that keep coming also
            // keep the low-speed limit from ever firing, so a body that never ends would hold the
            // run for ever: past a small cap the transfer is cut (a short count from the write
            // callback) and the 416 stands (docs/faults.md).
            discardedBytes += bytes.count
            if discardedBytes > Download.discardedBodyLimit {
                discardCut = true
                return false
            }
            return true
        case .reject(let failure):
            // 404, 5xx, a 3xx that was not followed...: cut at the first byte of its body.
            abortReason = failure
            return false
        case nil:
            return false
        }
        do {
            // One stream is segment 0, the whole file: what it still lacks is the rest of the file.
            if Int64(bytes.count) > target.segmentRemaining(segment ?? 0) {
                abortReason = .tooMuchData(limit: target.identity.size, ranged: segment != nil || (requestedOffset > 0 && !isFile))
                return false
            }
            try target.append(bytes, segment: segment ?? 0)
            bytesWritten += Int64(bytes.count)
        } catch let error as SystemError {
            abortReason = .writeFailed(error)
            return false
        } catch let wrong as PieceCheck.WrongPiece {
            // A piece of the file (perhaps another request's) did not match its hash: every request
            // of the file stops, and the sync thread rewinds it (``EntryWork/wrongPiece(_:_:)``).
            abortReason = .checksumMismatch("piece \(wrong.index) did not match its hash")
            return false
        } catch {
            abortReason = .writeFailed(SystemError("write", target.displayPath, code: 5))
            return false
        }
        return true
    }

    /// The most bytes of a body that is not the file's that are read before the transfer is cut:
    /// enough for any server's error page, small enough that an endless one costs nothing.
    static let discardedBodyLimit = 64 * 1024

    /// Checks the response head once, before any of its body is used.
    private func decide() {
        let status = isFile ? 200 : easy.responseCode
        let responseHead = ResponseHead(status: status, headers: headers)
        var decision = ResponseCheck.verdict(for: responseHead, requestedOffset: isFile ? 0 : requestedOffset,
                                             requestedEnd: isFile ? nil : requestedEnd, expectedSize: target.identity.size,
                                             conditional: condition != nil)
        switch decision {
        case .reject(.rangeIgnored) where segment == nil && !isFile:
            offerWholeFile(responseHead)
            decision = .accept(startOffset: 0)
        case .accept(let start):
            if segment == nil && start == 0 && target.length > 0 {
                // Bytes the request did not ask to keep: never written over here, on the transfer
                // thread, which does not journal; the sync thread cuts the file first (``WholeFile``).
                // A `file:` URL is read whole every time: it starts over, as it always did.
                if isFile { decision = .reject(.rangeIgnored) } else { offerWholeFile(responseHead) }
            } else if start > 0 || segment != nil, let held = target.heldValidator(for: url), let now = responseHead.resumeValidator, held != now {
                // Segments started without a validator compare theirs with the first one seen.
                decision = .reject(.validatorChanged)
            }
            if case .accept = decision, wholeFile == .none {
                target.adopt(url: url, validator: responseHead.resumeValidator)
            }
        default:
            break
        }
        verdict = decision
    }

    private func offerWholeFile(_ head: ResponseHead) {
        wholeFile = .offered
        offeredValidator = head.resumeValidator
    }

    /// Whether the write callback must pause: an offer the sync thread has not yet accepted.
    fileprivate var holdsBody: Bool {
        if verdict == nil { decide() }
        return wholeFile == .offered
    }

    private var offerNoticed = false

    /// Tells the engine of the offer, once.
    fileprivate func noticeOffer() {
        guard !offerNoticed else { return }
        offerNoticed = true
        engineNotice?(self)
    }

    /// On the transfer thread, once the sync thread has cut the file to nothing: the body goes in
    /// from byte 0, with the whole file's validator.
    func takeWholeFile() {
        wholeFile = .accepted
        target.sourceURL = url
        target.validator = offeredValidator
    }

    /// Called on the transfer thread when libcurl reports the transfer done.
    func finish(code: CURLcode) {
        if !isFile { linkSample = easy.linkSample }
        if verdict == nil && code == CURLE_OK { decide() }  // a response without a body
        if let abortReason {
            outcome = .failed(abortReason)
            return
        }
        if case .reject(let failure)? = verdict {
            outcome = .failed(failure)
            return
        }
        if case .notModified? = verdict, code == CURLE_OK {
            outcome = .notModified
            return
        }
        if case .rangeNotSatisfiable(let length)? = verdict, code == CURLE_OK || discardCut {
            outcome = .rangeNotSatisfiable(completeLength: length)
            return
        }
        guard code == CURLE_OK else {
            outcome = .failed(Download.classify(code, connected: easy.connectMicroseconds > 0,
                                                message: RequestSecurity.explain(code, message: easy.message(for: code), url: url),
                                                stalledAfter: bytesWritten == 0 && discardedBytes == 0 ? stallTimeout : nil))
            return
        }
        if let segment {
            let missing = target.segmentRemaining(segment)
            outcome = missing == 0 ? .complete
                : .failed(.shortBody(received: bytesWritten, expected: bytesWritten + missing))
        } else if target.length == target.identity.size {
            outcome = .complete
        } else {
            outcome = .failed(.shortBody(received: target.length, expected: target.identity.size))
        }
    }
}

/// `CURLOPT_HEADERFUNCTION`: returning anything but `size * nmemb` aborts the transfer.
private func downloadHeaderCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                                    _ userdata: UnsafeMutableRawPointer?) -> Int {
    forward(data, size * count, userdata) { $0.receiveHeader($1) }
}

/// `CURLOPT_WRITEFUNCTION`: returning anything but `size * nmemb` aborts with `CURLE_WRITE_ERROR`.
private func downloadWriteCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                                   _ userdata: UnsafeMutableRawPointer?) -> Int {
    if let userdata, size * count > 0 {
        // --limit-rate: an empty bucket pauses the transfer; libcurl delivers these bytes again on resume.
        let download = Unmanaged<Download>.fromOpaque(userdata).takeUnretainedValue()
        // A whole file offered for a resume waits for the sync thread (``Download/WholeFile``).
        if !download.cancelled && download.holdsBody {
            download.noticeOffer()
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        if let limiter = download.limiter, !download.cancelled, !limiter.admit(size * count) {
            limiter.didPause(download)
            return Int(CURL_WRITEFUNC_PAUSE)
        }
    }
    return forward(data, size * count, userdata) { $0.receiveBody($1) }
}

/// `CURLOPT_XFERINFOFUNCTION`: non-zero aborts the transfer with `CURLE_ABORTED_BY_CALLBACK`.
private func downloadProgressCallback(_ userdata: UnsafeMutableRawPointer?, _ dltotal: curl_off_t, _ dlnow: curl_off_t,
                                      _ ultotal: curl_off_t, _ ulnow: curl_off_t) -> Int32 {
    guard let userdata else { return 0 }
    let download = Unmanaged<Download>.fromOpaque(userdata).takeUnretainedValue()
    return download.receiveProgress(received: Int64(dlnow)) ? 0 : 1
}

/// Hands a callback's bytes to the ``Download`` its userdata points at (kept alive by the engine
/// while the handle is in the multi handle); returns what libcurl expects: all bytes, or 0 to abort.
@inline(__always)
private func forward(_ data: UnsafeMutablePointer<CChar>?, _ n: Int, _ userdata: UnsafeMutableRawPointer?,
                     _ receive: (Download, UnsafeRawBufferPointer) -> Bool) -> Int {
    guard let data, let userdata else { return 0 }
    let download = Unmanaged<Download>.fromOpaque(userdata).takeUnretainedValue()
    return receive(download, UnsafeRawBufferPointer(start: data, count: n)) ? n : 0
}
