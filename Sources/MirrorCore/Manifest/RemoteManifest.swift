import CCurl
import MirrorFS
import MirrorKit
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// A manifest named by URL (`https://`, `http://`, `file://`): fetched with libcurl, conditionally,
/// with a last good copy kept under `DEST/.mirror/manifest/` for the day the server is down.
///
/// - The request carries the validators of the last fetch of the same URL: `If-None-Match` with its
///   `ETag`, `If-Modified-Since` with its `Last-Modified` (RFC 9110 §13.1.2, §13.1.3). A `304 Not
///   Modified` means the last good copy is current. It also carries `Cache-Control: no-cache` and
///   `Pragma: no-cache` (``CacheRevalidation``, RFC 9111 §5.2.1.4, §5.4), and so does the
///   signature's: a cache on the way (a forward proxy, a site cache) must ask the origin before it
///   answers, else a copy it may keep for 60 days hides every newer manifest, each run `ok`.
/// - `Accept-Encoding: gzip` (`CURLOPT_ACCEPT_ENCODING`): libcurl undoes a `Content-Encoding: gzip`;
///   a body that is itself a gzip file (`manifest.yaml.gz`) is recognised by ``ManifestLoader``.
/// - A fetched manifest replaces the last good copy only once it parsed as a valid manifest; an
///   invalid one is an error (exit 65) and the copy stays as it was. A manifest with a credential
///   in one of its URLs is never kept (the copy would hold it word for word).
/// - When the server cannot be reached, answers 5xx or anything but 200/304/404/410, the last
///   good copy is used and ``Result/origin`` says why; with no copy the run cannot start
///   (``Failure/unreachable``, exit 75).
/// - `404 Not Found` or `410 Gone` (RFC 9110 §15.5.5, §15.5.11) is an answer, not an outage: the
///   server says there is no manifest at this URL (a mistyped URL, a manifest withdrawn). It is
///   ``Failure/notFound(url:status:)`` (exit 1) every run, and no copy is used.
/// - A copy is used only for the URL it was fetched from (`url` in `last.validators`, user-info
///   masked): a mistyped URL in a cron line must never run on the copy another URL left. A copy of
///   another URL is replaced when this URL's manifest is fetched.
/// - The copy is used (on a 304 or as a fallback) only if it is the one this user kept: owner,
///   mode and SHA-256 as recorded (``Cache``), and under `--trust` its signature, checked over the
///   bytes as stored before they are gunzipped or parsed. Any other copy is discarded (a warning,
///   then a full fetch), never used and never fatal. A manifest from the copy never gives
///   `file:` rights (``Result/isReadNow``).
/// - Under `--trust`, the detached signature `<URL>.sig` is fetched after each new manifest and
///   kept beside the copy (a 404 means the manifest is unsigned); checking it is the caller's
///   business. Without `--trust` it is not asked for, and the copy keeps none: a later run with
///   `--trust` finds the copy unsigned, discards it and fetches both.
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
        /// Remarks a person should see (standard error and the log): a kept copy that was
        /// discarded, a manifest that was not kept.
        public var warnings: [String] = []
        /// Source, digest, ETag and since when it is known current (``ManifestProvenance``).
        public var provenance: ManifestProvenance
        /// With a saved copy in use: when a run last said so on standard error (``SavedCopyNotice``).
        public var lastNoted: Double?

        /// Whether the manifest was read now from what `url` names, rather than from the copy
        /// kept under DEST: only a manifest read now from a `file:` URL the user gave may name
        /// `file:` URLs (``RequestSecurity/manifestIsLocal``). A kept copy sits in a folder others
        /// may write in, so it never gives that right, whatever URL it was fetched from.
        public var isReadNow: Bool { origin == .fetched }
    }

    public enum Failure: Error, CustomStringConvertible, Sendable {
        /// The manifest could not be fetched and no last good copy exists.
        case unreachable(url: String, reason: String)
        /// Interrupted by SIGINT or SIGTERM while fetching.
        case interrupted(url: String)
        /// The last good copy could not be written.
        case cache(SystemError)
        /// `status` or `verify` of a manifest URL: no usable copy kept under DEST.
        case noKeptCopy(url: String, destination: String, reason: String)
        /// The server answered 404 or 410: there is no manifest at this URL.
        case notFound(url: String, status: Int)

        public var description: String {
            switch self {
            case .unreachable(let url, let reason):
                return "\(redactedURL(url)): cannot fetch the manifest (\(reason)) and there is no last good copy to use"
            case .interrupted(let url): return "\(redactedURL(url)): interrupted while fetching the manifest"
            case .cache(let error): return "cannot keep the last good copy of the manifest: \(error)"
            case .noKeptCopy(let url, let destination, let reason):
                return "\(redactedURL(url)): no last good copy of the manifest to read in \(destination)/.mirror/manifest: \(reason); "
                    + "status and verify never use the network: run `mirror sync` once to fetch it"
            case .notFound(let url, let status):
                let phrase = status == 410 ? "Gone" : "Not Found"
                return "\(redactedURL(url)): the server answered \(status) (\(phrase)): there is no manifest at this URL; "
                    + "check the URL (no kept copy is used for a manifest the server says is not there)"
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

    /// The manifest in `bytes`, with what a checked list's mark says (``KeptPublishedCopy/applyMark(of:to:)``).
    static func parse(_ bytes: [UInt8], sourceName: String) throws -> Manifest {
        var manifest = try ManifestLoader.parse(bytes, sourceName: sourceName)
        KeptPublishedCopy.applyMark(of: bytes, to: &manifest)
        return manifest
    }

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
    ///   - verifyCopy: the check of a kept copy, when it differs from `verify`'s (a checksum list
    ///     is kept as the YAML manifest made of it, which its OpenPGP signature no longer covers).
    ///   - prepare: what the fetched bytes become once verified (``PublishedList``: a checksum list
    ///     is made into a YAML manifest); what it returns is parsed and kept as the copy.
    public static func load(url: String, destination: String, settings: TransferSettings = TransferSettings(),
                            saveCopy: Bool = true, verify: (([UInt8], [UInt8]?) throws -> Void)? = nil,
                            verifyCopy: (([UInt8], [UInt8]?) throws -> Void)? = nil,
                            admit: ((Manifest, String) throws -> Void)? = nil,
                            prepare: (([UInt8]) throws -> [UInt8])? = nil) throws -> Result {
        try load(url: url, cache: Cache(destination: destination, saving: saveCopy), settings: settings, useCopy: true,
                 checks: Checks(verify: verify, verifyCopy: verifyCopy ?? verify, admit: admit, prepare: prepare))
    }

    /// What a fetch checks and makes of the bytes (``load(url:destination:settings:saveCopy:verify:verifyCopy:admit:prepare:)``).
    private struct Checks {
        var verify: (([UInt8], [UInt8]?) throws -> Void)?
        var verifyCopy: (([UInt8], [UInt8]?) throws -> Void)?
        var admit: ((Manifest, String) throws -> Void)?
        var prepare: (([UInt8]) throws -> [UInt8])?
    }

    /// `admit`: asked of a manifest fetched now, with the SHA-256 of its bytes, after it parsed and
    /// before it is kept as the last good copy (``SerialGate``: an older signed manifest must not
    /// replace the copy a later run would fall back on).
    private static func load(url: String, cache: Cache, settings: TransferSettings, useCopy: Bool, checks: Checks,
                             warnings: [String] = []) throws -> Result {
        let (verify, admit) = (checks.verify, checks.admit)
        let name = redactedURL(url)
        var warnings = warnings
        var saved: Cache.Saved?
        /// The URL the copy under DEST was fetched from, when it is another one.
        var otherURL: String?
        if useCopy {
            switch cache.read() {
            case .none: break
            case .usable(let copy) where copy.validators.url != name: otherURL = copy.validators.url
            case .usable(let copy): saved = copy
            case .discarded(let why): warnings.append("\(name): the last good copy of the manifest is not used: \(why)")
            }
        }
        /// Why there is no copy to fall back on, for ``Failure/unreachable(url:reason:)``.
        let noCopy = otherURL.map { " (the copy kept in \(cache.destination)/.mirror/manifest is of \($0), not of this URL)" } ?? ""
        // --trust: the copy's signature is checked over its bytes as stored (what was signed and
        // served) before they are gunzipped or parsed, and only when the copy is about to be used
        // (a --signature file may already be the next manifest's); one that fails is discarded.
        func verified(_ copy: Cache.Saved?) -> Cache.Saved? {
            guard let copy, let verifyCopy = checks.verifyCopy else { return copy }
            do {
                try verifyCopy(copy.bytes, copy.signature)
                return copy
            } catch {
                warnings.append("\(name): the last good copy of the manifest is not used: \(error)")
                return nil
            }
        }
        let validators = saved?.validators

        var response: SmallFetch.Response
        do {
            response = try SmallFetch.get(url, validators: validators, limit: sizeLimit, settings: settings, revalidate: true)
        } catch let failure as SmallFetch.Failure {
            if case .interrupted = failure { throw Failure.interrupted(url: url) }
            let copy = verified(saved)
            return try fallBack(copy, url: url, reason: failure.description + noCopy, warnings: warnings)
        }
        if response.status == 404 || response.status == 410 { throw Failure.notFound(url: url, status: response.status) }
        if response.status == 304, saved != nil, validators != nil {
            if let copy = verified(saved) {
                if let manifest = try? RemoteManifest.parse(copy.bytes, sourceName: name) {
                    let now = currentUnixTime()
                    cache.mark(copy, confirmed: now)
                    return Result(manifest: manifest, origin: .notModified, warnings: warnings,
                                  provenance: ManifestProvenance(source: .notModified, sha256: copy.sha256,
                                                                 etag: copy.validators.etag, confirmed: now))
                }
                warnings.append("\(name): the last good copy of the manifest no longer parses; it is fetched again")
            }
            // Refused by its signature, or no longer parses (a newer mirror's rules?): ask again
            // without validators.
            return try load(url: url, cache: cache, settings: settings, useCopy: false, checks: checks, warnings: warnings)
        }
        guard response.isSuccess else {
            let copy = verified(saved)
            return try fallBack(copy, url: url, reason: "the server answered \(response.status)" + noCopy, warnings: warnings)
        }
        // Only under --trust: a run that checks no signature has no use for one, and asking
        // anyway leaves a 404 in the origin's log for every unsigned manifest, every run.
        var signature = verify == nil ? nil : fetchSignature(url, settings: settings)
        if let verify {
            do {
                try verify(response.body, signature)
            } catch let refused as SignatureError {
                // The manifest and its signature are two files, published one after the other:
                // a run between the two writes meets the new manifest with the old signature (or
                // none). Both are asked again once, after the publish has had time to finish
                // (docs/signing.md, "Publishing"); a second refusal is the answer (exit 65).
                guard StopSignal.pause(signatureRetryDelay) else { throw Failure.interrupted(url: url) }
                guard let again = try? SmallFetch.get(url, validators: nil, limit: sizeLimit, settings: settings, revalidate: true),
                      again.isSuccess else { throw refused }
                let againSignature = fetchSignature(url, settings: settings)
                try verify(again.body, againSignature)
                warnings.append("\(name): the signature did not match at first (\(refused.cause.summary)); "
                    + "both were fetched again \(Int(signatureRetryDelay)) s later and matched: a publish was in progress")
                (response, signature) = (again, againSignature)
            }
        }
        if let prepare = checks.prepare { response.body = try prepare(response.body) }
        let manifest = try RemoteManifest.parse(response.body, sourceName: name)
        try admit?(manifest, Cache.sha256(response.body))
        do {
            if let credential = credentialURL(in: manifest) {
                // Never on disk: the copy would hold the credential word for word.
                try cache.remove()
                warnings.append("\(name): the manifest is not kept as the last good copy, because \(redactedURL(credential)) "
                    + "carries a credential (user-info) that must not be written to disk; each run fetches it in full and "
                    + "there is no copy to fall back on. Pass credentials with --netrc-file or --auth-header-env instead.")
            } else if let why = try cache.write(bytes: response.body, signature: signature,
                                                validators: Validators(url: name, etag: response.etag, lastModified: response.lastModified)) {
                warnings.append("\(name): \(why)")
            }
        } catch let error as SystemError where error.code == ENOSPC || error.code == EDQUOT {
            // A full disk must not stop the run that would free space (its sweep of partials no
            // entry owns, its deletions): it goes on with the manifest fetched, not kept.
            try? cache.remove()
            warnings.append("\(name): the manifest is not kept as the last good copy (\(error)); the run goes on with the copy fetched")
        } catch let error as SystemError {
            throw Failure.cache(error)
        }
        return Result(manifest: manifest, origin: .fetched, warnings: warnings,
                      provenance: ManifestProvenance(source: .fetched, sha256: Cache.sha256(response.body), etag: response.etag,
                                                     confirmed: currentUnixTime()))
    }

    /// The last good copy, when the fetch failed. It was checked (digest, owner, signature under
    /// `--trust`) by ``load(url:cache:settings:useCopy:checks:warnings:)`` before it gets here.
    private static func fallBack(_ saved: Cache.Saved?, url: String, reason: String, warnings: [String]) throws -> Result {
        let name = redactedURL(url)
        guard let saved, let manifest = try? RemoteManifest.parse(saved.bytes, sourceName: name) else {
            let discarded = warnings.isEmpty ? "" : " (\(warnings.joined(separator: "; ")))"
            throw Failure.unreachable(url: url, reason: reason + discarded)
        }
        let when = saved.current.map { " (current as of \(Formatting.rfc3339($0)))" } ?? ""
        return Result(manifest: manifest, origin: .lastGoodCopy("\(name): cannot fetch the manifest (\(reason)); using the last good copy\(when)"),
                      warnings: warnings, provenance: saved.provenance, lastNoted: saved.noted)
    }

    /// The copy kept for `url` under `destination`, without the network: for `status` and
    /// `verify`, which must answer while the server is down (docs/manifest.md; it used to say "cannot read
    /// manifest: No such file or directory", exit 65). The same checks as a sync's fallback (owner,
    /// mode, digest). Throws ``Failure/noKeptCopy(url:destination:reason:)`` (exit 65) when there is
    /// none to use, ``ManifestError`` when it no longer parses.
    public static func keptCopy(url: String, destination: String) throws -> Result {
        let name = redactedURL(url)
        switch Cache(destination: destination, saving: false).read() {
        case .none:
            throw Failure.noKeptCopy(url: url, destination: destination, reason: "there is none (no sync has fetched it yet)")
        case .discarded(let why):
            throw Failure.noKeptCopy(url: url, destination: destination, reason: why)
        case .usable(let saved):
            guard saved.validators.url == name else {
                throw Failure.noKeptCopy(url: url, destination: destination, reason: "the copy there was fetched from \(saved.validators.url)")
            }
            let manifest = try RemoteManifest.parse(saved.bytes, sourceName: name)
            return Result(manifest: manifest, origin: .lastGoodCopy("\(name): the last good copy kept in \(destination)/.mirror/manifest"),
                          provenance: saved.provenance, lastNoted: saved.noted)
        }
    }

    /// Records that a run said, at `time`, that it used the saved copy (``SavedCopyNotice``).
    public static func recordNotice(destination: String, at time: Double) {
        let cache = Cache(destination: destination)
        guard let saved = cache.read().saved else { return }
        cache.mark(saved, noted: time)
    }

    /// The first URL of `manifest` (`base_url`, a mirror, an entry's absolute `url`) that has
    /// user-info (RFC 3986 §3.2.1), or nil.
    static func credentialURL(in manifest: Manifest) -> String? {
        firstURL(in: manifest) { URLParts($0)?.userInfo != nil }
    }

    /// The first `file:` URL of `manifest` (`base_url`, a mirror, an entry's absolute `url`), or nil.
    public static func fileURL(in manifest: Manifest) -> String? {
        firstURL(in: manifest) { $0.lowercased().hasPrefix("file:") }
    }

    private static func firstURL(in manifest: Manifest, where matches: (String) -> Bool) -> String? {
        for base in [manifest.baseURL].compactMap({ $0 }) + manifest.mirrors where matches(base) { return base }
        // An entry without `url` has only its path, which holds no scheme or authority.
        for entry in manifest.entries {
            switch entry.explicitURL {
            case nil: continue
            case .absolute(let url): if matches(url) { return url }
            case .mirrored(let urls): if let url = urls.first(where: matches) { return url }
            // A network-path reference (`//user:pass@host/x`, RFC 3986 §4.2) has an authority too.
            case .relative(let reference): if reference.hasPrefix("//"), matches("x:" + reference) { return reference }
            }
        }
        return nil
    }

    /// `<URL>.sig`: its bytes when served with 200 (or read from a `file:` URL), else nil.
    private static func fetchSignature(_ url: String, settings: TransferSettings) -> [UInt8]? {
        guard let response = try? SmallFetch.get(url + ".sig", validators: nil, limit: signatureLimit, settings: settings,
                                                 revalidate: true),
              response.isSuccess, !response.body.isEmpty else { return nil }
        return response.body
    }

    /// How long a refused signature waits before the manifest and its signature are asked again:
    /// longer than a publish takes to write its two files (docs/signing.md, "Publishing").
    static let signatureRetryDelay: Double = 2

    /// The validators of the last fetch of a URL, kept with the copy (``SmallFetch`` sends them).
    typealias Validators = SmallFetch.Validators
}
