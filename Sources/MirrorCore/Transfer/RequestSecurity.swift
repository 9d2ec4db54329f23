import CCurl
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// What every request may reach and which credentials it carries (SECURITY.md, "Requests" and
/// "Credentials").
///
/// - Schemes: `http`/`https` only, and `file` only for an entry whose own URL is `file://` in a
///   manifest read from the local disk (`CURLOPT_PROTOCOLS_STR`); after a redirect only
///   `http`/`https` (`CURLOPT_REDIR_PROTOCOLS_STR`), so a server can never make `mirror` read a
///   local file. At most ``TransferSettings/maxRedirects`` redirects (`CURLOPT_MAXREDIRS`).
/// - TLS: peer and host verification are set on explicitly (`CURLOPT_SSL_VERIFYPEER` = 1,
///   `CURLOPT_SSL_VERIFYHOST` = 2) and nothing turns them off. `caFile` (`--ca-file`) becomes
///   `CURLOPT_CAINFO`; libcurl's built-in `CURLOPT_CAPATH` (the system's hashed certificate folder,
///   `/etc/ssl/certs` on Debian) stays set, so the lab CA is trusted in addition to the system's.
/// - Credentials: URL user-info, else the netrc entry ``CredentialScope`` allows for the URL's
///   origin (one the manifest names; `default` only for the manifest URL's own; never a
///   `--prefer` source), looked up here and passed as `CURLOPT_USERNAME`/`CURLOPT_PASSWORD`, not
///   through libcurl's own netrc support (`CURLOPT_NETRC` is set to `CURL_NETRC_IGNORED`: it
///   matches by host name alone and re-reads the file for redirect targets), and an
///   `Authorization` header whose value comes from an environment variable (never from the
///   manifest). libcurl sends none of
///   them to another scheme, host or port after a redirect (`CURLOPT_UNRESTRICTED_AUTH` = 0, the
///   default, set explicitly; custom `Authorization` headers are dropped on such a redirect since
///   libcurl 7.83, CVE-2022-27776).
///   `Tests/IntegrationTests/CredentialTests.swift` proves each against the installed libcurl.
public struct RequestSecurity: Sendable {
    /// `--ca-file`: an extra trusted CA (PEM).
    public var caFile: String?
    /// `--netrc-file`: credentials by host, for the origins ``credentialScope`` allows.
    public var netrc: Netrc?
    /// Where netrc credentials may go: the manifest URL's origin (set once the manifest URL is
    /// known), and ``manifestSources``' origins.
    public var credentialScope = CredentialScope()
    /// The manifest's URLs for what this request fetches (an entry's `base_url`, mirrors or
    /// absolute `url`; a chunk index's), set per request by the runner. Empty (the default): only
    /// the manifest URL's origin may get a netrc credential.
    public var manifestSources: [String] = []
    /// The value of the `Authorization` header (read from the environment variable named by
    /// `--auth-header-env`). Never printed: ``CustomStringConvertible`` masks it.
    public var authorization: String?
    /// Whether the manifest was read from the local disk: only then may an entry's `file://` URL be used.
    public var manifestIsLocal = true

    public init() {}

    /// Sets the scheme, redirect, TLS and credential options of one request, and returns the extra
    /// header lines it must carry.
    func apply(to easy: CurlEasy, url: String, maxRedirects: Int) throws -> [String] {
        let isFile = url.lowercased().hasPrefix("file:")
        try easy.set(CURLOPT_PROTOCOLS_STR, manifestIsLocal && isFile ? "http,https,file" : "http,https")
        try easy.set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        try easy.set(CURLOPT_FOLLOWLOCATION, 1)
        try easy.set(CURLOPT_MAXREDIRS, maxRedirects)
        try easy.set(CURLOPT_SSL_VERIFYPEER, 1)
        try easy.set(CURLOPT_SSL_VERIFYHOST, 2)
        if let caFile { try easy.set(CURLOPT_CAINFO, caFile) }
        try easy.set(CURLOPT_UNRESTRICTED_AUTH, 0)
        // Said explicitly: libcurl's own netrc lookup goes by host name alone (CredentialScope).
        try easy.set(CURLOPT_NETRC, Int(CURL_NETRC_IGNORED.rawValue))
        if isFile { return [] }
        if let netrc, URLParts(url)?.userInfo == nil,
           let credentials = netrc.credentials(for: credentialScope.lookup(for: url, manifestSources: manifestSources)) {
            try easy.set(CURLOPT_USERNAME, credentials.login)
            try easy.set(CURLOPT_PASSWORD, credentials.password)
        }
        guard let authorization else { return [] }
        return ["Authorization: \(authorization)"]
    }

    /// A TLS failure in words a person can act on: which host, what failed, and the option that helps.
    static func explain(_ code: CURLcode, message: String, url: String) -> String {
        let tls: [CURLcode] = [CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CACERT_BADFILE,
                               CURLE_SSL_CERTPROBLEM, CURLE_SSL_ISSUER_ERROR]
        guard tls.contains(code) else { return message }
        let host = URLParts(url).map { String($0.hostAndPort) } ?? redactedURL(url)
        var text = "TLS verification of \(host) failed: \(message)"
        if code == CURLE_PEER_FAILED_VERIFICATION {
            text += " (if the server uses a lab CA, pass it with --ca-file PEM)"
        }
        return text
    }

    /// Reads an `Authorization` value from the environment variable `name`; the error names the
    /// variable, never a value.
    public static func authorization(fromEnvironment name: String) throws -> String {
        guard let raw = getenv(name) else { throw CredentialError.missingVariable(name) }
        let value = String(cString: raw)
        if value.isEmpty { throw CredentialError.missingVariable(name) }
        // A line break would end the header and start another one (header injection).
        if value.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D }) { throw CredentialError.lineBreak(name) }
        return value
    }
}

extension RequestSecurity: CustomStringConvertible {
    /// Never shows the secret, so a stray `print(settings)` cannot leak it.
    public var description: String {
        "RequestSecurity(caFile: \(caFile ?? "-"), netrc: \(netrc?.path ?? "-"), authorization: \(authorization == nil ? "-" : "***"))"
    }
}

/// A credential option that cannot be used. Messages name the option or variable, never a secret.
public enum CredentialError: Error, CustomStringConvertible {
    case missingVariable(String)
    case lineBreak(String)

    public var description: String {
        switch self {
        case .missingVariable(let name):
            return "--auth-header-env \(name): the environment variable \(name) is not set or empty"
        case .lineBreak(let name):
            return "--auth-header-env \(name): the value of \(name) contains a line break, which an HTTP header cannot carry"
        }
    }
}
