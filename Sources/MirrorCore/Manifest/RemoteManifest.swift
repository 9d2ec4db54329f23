import CCurl
#if canImport(Glibc)
import Glibc
#endif

/// A manifest named by URL (`https://`, `http://`, `file://`): fetched with libcurl, conditionally,
/// with a last good copy kept under `DEST/.mirror/manifest/` for the day the server is down.
///
/// - The request carries the validators of the last fetch of the same URL: `If-None-Match` with its
///   `ETag`, `If-Modified-Since` with its `Last-Modified` (RFC 9110 §13.1.2, §13.1.3). A `304 Not
///   Modified` means the last good copy is current.
/// - `Accept-Encoding: gzip` (`CURLOPT_ACCEPT_ENCODING`): libcurl undoes a `Content-Encoding: gzip`;
///   a body that is itself a gzip file (`manifest.yaml.gz`) is recognised by ``ManifestLoader``.
/// - A fetched manifest replaces the last good copy only once it parsed as a valid manifest; an
///   invalid one is an error (exit 65) and the copy stays as it was.
/// - When the server cannot be reached, answers 5xx or anything but 200/304, the last good copy
///   is used and ``Result/origin`` says why; with no copy the run cannot start
///   (``Failure/unreachable``, exit 75).
/// - The detached signature `<URL>.sig` is fetched after each new manifest and kept beside the
///   copy (a 404 means the manifest is unsigned); checking it is the caller's business.
///
/// Every URL in a message or on disk has its user-info masked (``redactedURL(_:)``).
public enum RemoteManifest {
    public enum Origin: Sendable, Equatable {
        /// Fetched now (200, or a `file:` URL read now).
        case fetched
        /// The server said 304: the last good copy is current.
        case notModified
        /// The server could not be asked; the last good copy is used. The text says why.
        case lastGoodCopy(String)
    }

    public struct Result: Sendable {
        public var manifest: Manifest
        public var origin: Origin
    }

    public enum Failure: Error, CustomStringConvertible, Sendable {
        /// The manifest could not be fetched and no last good copy exists.
        case unreachable(url: String, reason: String)
        /// Interrupted by SIGINT or SIGTERM while fetching.
        case interrupted(url: String)
        /// The last good copy could not be written.
        case cache(SystemError)

        public var description: String {
            switch self {
            case .unreachable(let url, let reason):
                return "\(redactedURL(url)): cannot fetch the manifest (\(reason)) and there is no last good copy to use"
            case .interrupted(let url): return "\(redactedURL(url)): interrupted while fetching the manifest"
            case .cache(let error): return "cannot keep the last good copy of the manifest: \(error)"
            }
        }
    }

    /// The folder under `DEST/.mirror/` and the names in it.
    static let folderName = "manifest"
    static let copyName = "last.yaml"
    static let signatureName = "last.yaml.sig"
    static let validatorsName = "last.validators"
    /// Larger manifests are refused (the same bound as for gunzipped ones).
    static let sizeLimit = Gzip.defaultLimit
    static let signatureLimit = 64 * 1024

    /// Whether `argument` names a manifest by URL rather than by path.
    public static func isURL(_ argument: String) -> Bool {
        let lower = argument.lowercased()
        return lower.hasPrefix("https://") || lower.hasPrefix("http://") || lower.hasPrefix("file://")
    }

    /// Fetches the manifest at `url` for the destination `destination` (whose `.mirror/manifest`
    /// holds the last good copy). Throws ``ManifestError`` for an invalid manifest, ``Failure``
    /// otherwise. With `saveCopy` false (`--dry-run`) nothing is written.
    ///
    /// - Parameter verify: `--trust`: called with the manifest's bytes and its signature (nil when
    ///   there is none) before a fetched manifest is used or saved, and before a saved copy is used;
    ///   what it throws ends the load, and a refused manifest never replaces the last good copy.
    public static func load(url: String, destination: String, settings: TransferSettings = TransferSettings(),
                            saveCopy: Bool = true, verify: (([UInt8], [UInt8]?) throws -> Void)? = nil) throws -> Result {
        try load(url: url, cache: Cache(destination: destination, saving: saveCopy), settings: settings, useCopy: true,
                 verify: verify)
    }

    private static func load(url: String, cache: Cache, settings: TransferSettings, useCopy: Bool,
                             verify: (([UInt8], [UInt8]?) throws -> Void)?) throws -> Result {
        let name = redactedURL(url)
        let saved = useCopy ? cache.read() : nil
        let validators = saved.flatMap { $0.validators.url == name ? $0.validators : nil }

        let response: Response
        do {
            response = try fetch(url, validators: validators, limit: sizeLimit, settings: settings)
        } catch let failure as FetchFailure {
            if case .interrupted = failure { throw Failure.interrupted(url: url) }
            return try fallBack(saved, url: url, reason: failure.description, verify: verify)
        }
        if response.status == 304, let saved, validators != nil {
            try verify?(saved.bytes, saved.signature)
            if let manifest = try? ManifestLoader.parse(saved.bytes, sourceName: name) {
                return Result(manifest: manifest, origin: .notModified)
            }
            // The copy no longer parses (edited by hand?): ask again without validators.
            return try load(url: url, cache: cache, settings: settings, useCopy: false, verify: verify)
        }
        guard response.isSuccess else {
            return try fallBack(saved, url: url, reason: "the server answered \(response.status)", verify: verify)
        }
        let signature = fetchSignature(url, settings: settings)
        try verify?(response.body, signature)
        let manifest = try ManifestLoader.parse(response.body, sourceName: name)
        do {
            try cache.write(bytes: response.body, signature: signature,
                            validators: Validators(url: name, etag: response.etag, lastModified: response.lastModified))
        } catch let error as SystemError {
            throw Failure.cache(error)
        }
        return Result(manifest: manifest, origin: .fetched)
    }

    /// The last good copy, when the fetch failed: it was valid when saved, so it parses.
    private static func fallBack(_ saved: Cache.Saved?, url: String, reason: String,
                                 verify: (([UInt8], [UInt8]?) throws -> Void)?) throws -> Result {
        let name = redactedURL(url)
        guard let saved, let manifest = try? ManifestLoader.parse(saved.bytes, sourceName: name) else {
            throw Failure.unreachable(url: url, reason: reason)
        }
        try verify?(saved.bytes, saved.signature)
        let when = saved.savedAt.map { " saved \(Formatting.rfc3339($0))" } ?? ""
        return Result(manifest: manifest, origin: .lastGoodCopy("\(name): cannot fetch the manifest (\(reason)); using the last good copy\(when)"))
    }

    /// `<URL>.sig`: its bytes when served with 200 (or read from a `file:` URL), else nil.
    private static func fetchSignature(_ url: String, settings: TransferSettings) -> [UInt8]? {
        guard let response = try? fetch(url + ".sig", validators: nil, limit: signatureLimit, settings: settings),
              response.isSuccess, !response.body.isEmpty else { return nil }
        return response.body
    }

    // MARK: - The last good copy

    /// `DEST/.mirror/manifest/`: `last.yaml` (the bytes of the last manifest that parsed),
    /// `last.yaml.sig` (its signature, when it had one) and `last.validators` (`url`, `etag`,
    /// `last-modified`, one per line, tab-separated). Opened through ``Destination`` (no symlink
    /// followed) and replaced atomically, one file at a time, in an order that is safe at any crash
    /// point: the validators go first and come back last, so a copy is never paired with the
    /// validators of another copy (without validators the next fetch is unconditional).
    struct Cache {
        let destination: String
        var saving = true

        struct Saved {
            var bytes: [UInt8]
            var signature: [UInt8]?
            var validators: Validators
            var savedAt: Double?
        }

        func read() -> Saved? {
            guard let dest = try? Destination.openExisting(destination),
                  let folder = try? dest.stateFolder(RemoteManifest.folderName, create: false),
                  let copy = Cache.open(folder, RemoteManifest.copyName) else { return nil }
            guard let bytes = try? copy.readAll() else { return nil }
            let savedAt = (try? copy.stat()).map { Double($0.mtime.seconds) }
            let signature = Cache.open(folder, RemoteManifest.signatureName).flatMap { try? $0.readAll() }
            var validators = Validators(url: "", etag: nil, lastModified: nil)
            if let file = Cache.open(folder, RemoteManifest.validatorsName), let text = try? file.readAll() {
                for line in String(decoding: text, as: UTF8.self).split(separator: "\n") {
                    guard let tab = line.firstIndex(of: "\t") else { continue }
                    let value = String(line[line.index(after: tab)...])
                    switch line[..<tab] {
                    case "url": validators.url = value
                    case "etag": validators.etag = value
                    case "last-modified": validators.lastModified = value
                    default: break
                    }
                }
            }
            return Saved(bytes: bytes, signature: signature, validators: validators, savedAt: savedAt)
        }

        func write(bytes: [UInt8], signature: [UInt8]?, validators: Validators) throws {
            guard saving else { return }
            let dest = try Destination.create(destination)
            guard let folder = try dest.stateFolder(RemoteManifest.folderName, create: true) else {
                throw SystemError("create", dest.display(".mirror/manifest"), code: ENOENT)
            }
            try Cache.remove(folder, RemoteManifest.validatorsName)
            try Cache.remove(folder, RemoteManifest.signatureName)
            try replaceFileAtomically(folder: folder, name: RemoteManifest.copyName, bytes: bytes)
            if let signature {
                try replaceFileAtomically(folder: folder, name: RemoteManifest.signatureName, bytes: signature)
            }
            var text = "url\t\(validators.url)\n"
            // A header value never holds a line break (libcurl splits lines), but make sure.
            if let etag = validators.etag, !etag.contains("\n") { text += "etag\t\(etag)\n" }
            if let date = validators.lastModified, !date.contains("\n") { text += "last-modified\t\(date)\n" }
            try replaceFileAtomically(folder: folder, name: RemoteManifest.validatorsName, bytes: Array(text.utf8))
        }

        static func open(_ folder: FileDescriptor, _ name: String) -> FileDescriptor? {
            let fd = openat(folder.fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            return fd >= 0 ? FileDescriptor(fd: fd, displayPath: folder.displayPath + "/" + name) : nil
        }

        static func remove(_ folder: FileDescriptor, _ name: String) throws {
            if unlinkat(folder.fd, name, 0) != 0 && errno != ENOENT {
                throw SystemError("remove", folder.displayPath + "/" + name)
            }
        }
    }

    // MARK: - The request

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

    enum FetchFailure: Error, CustomStringConvertible {
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

    /// One blocking request with `curl_easy_perform` (before any transfer starts, so no multi
    /// handle is needed). HTTP statuses are returned, not thrown; libcurl errors are thrown.
    static func fetch(_ url: String, validators: Validators?, limit: Int, settings: TransferSettings) throws -> Response {
        let easy: CurlEasy
        do { easy = try CurlEasy() } catch { throw FetchFailure.curl("\(error)") }
        let sink = FetchSink(limit: limit)
        let userdata = Unmanaged.passUnretained(sink).toOpaque()
        do {
            // The same schemes, redirects, TLS (`--ca-file`), credentials and timeouts as every download.
            var headers = try settings.configure(easy, url: url)
            try easy.set(CURLOPT_ACCEPT_ENCODING, "gzip")
            if let etag = validators?.etag { headers.append("If-None-Match: \(etag)") }
            if let date = validators?.lastModified { headers.append("If-Modified-Since: \(date)") }
            if !headers.isEmpty { try easy.setHeaders(headers) }
            try easy.set(CURLOPT_HEADERFUNCTION, callback: fetchHeaderCallback)
            try easy.set(CURLOPT_HEADERDATA, pointer: userdata)
            try easy.set(CURLOPT_WRITEFUNCTION, callback: fetchWriteCallback)
            try easy.set(CURLOPT_WRITEDATA, pointer: userdata)
            // The progress callback is where a SIGINT/SIGTERM during the fetch is noticed.
            try easy.set(CURLOPT_NOPROGRESS, 0)
            _ = mirror_curl_easy_setopt_xferinfo_callback(easy.handle, fetchProgressCallback)
        } catch {
            throw FetchFailure.curl("\(error)")
        }
        let code = withExtendedLifetime(sink) { curl_easy_perform(easy.handle) }
        if sink.overflowed { throw FetchFailure.tooLarge(limit) }
        if code == CURLE_ABORTED_BY_CALLBACK { throw FetchFailure.interrupted }
        guard code == CURLE_OK else { throw FetchFailure.curl(easy.message(for: code)) }
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
    StopSignal.received != 0 ? 1 : 0
}
