import MirrorKit

/// Where netrc credentials (`--netrc-file`) may go: facts in (the request's URL, the manifest's
/// URL, the manifest's sources for what the request fetches), a decision out. No file, no server;
/// unit-tested in `Tests/MirrorCoreTests/Policy/CredentialScopeTests.swift`. SECURITY.md,
/// "Credentials", states the same rules.
///
/// - A `machine` entry goes only to an origin the manifest names (RFC 6454 §4: scheme, host and
///   port): the manifest URL's own, or one of the manifest's sources for the request (its
///   `base_url`, a mirror, an entry's absolute `url`). A `--prefer` source is the machine's choice,
///   not the manifest's: a site cache or a neighbour on the same host name but another port or
///   scheme is another origin, and gets nothing (it is asked in plain http more often than not).
/// - A `default` entry goes only to the manifest URL's origin: it is not tied to any host, so
///   anything wider would hand it to every host a manifest author can name. A manifest read from
///   the local disk has no origin of its own: its sources need `machine` entries.
/// - The credential is handed to libcurl as `CURLOPT_USERNAME`/`CURLOPT_PASSWORD` for the one
///   request it was decided for (``RequestSecurity``), never as `CURLOPT_NETRC`, which looks
///   every host up by name alone; `CURLOPT_UNRESTRICTED_AUTH` stays 0, so a redirect to another
///   origin never carries it.
public struct CredentialScope: Sendable, Equatable {
    /// The origin of the manifest's URL; nil for a manifest read from the local disk.
    public var manifestOrigin: Origin?

    public init(manifestURL: String? = nil) {
        manifestOrigin = manifestURL.flatMap(Origin.init)
    }

    /// Which netrc entry one request may use.
    public enum Lookup: Equatable, Sendable {
        /// No netrc credential at all.
        case none
        /// The `machine` entry for this host, and no `default`.
        case machine(String)
        /// The `machine` entry for this host, else the `default` entry.
        case machineOrDefault(String)
    }

    /// The netrc entry a request to `url` may use. `manifestSources`: the URLs the manifest gives
    /// for what the request fetches (``Manifest/sources(for:)``, ``Manifest/chunkIndexSources(for:)``);
    /// empty for the manifest itself.
    public func lookup(for url: String, manifestSources: [String]) -> Lookup {
        guard let origin = Origin(url) else { return .none }
        if origin == manifestOrigin { return .machineOrDefault(origin.host) }
        if manifestSources.contains(where: { Origin($0) == origin }) { return .machine(origin.host) }
        return .none
    }
}

/// A URL's origin (RFC 6454 §4): scheme, host and port, lowercased, the port made explicit (80 for
/// `http`, 443 for `https`). Only `http` and `https` have one here: credentials go nowhere else.
public struct Origin: Hashable, Sendable, CustomStringConvertible {
    public let scheme: String
    /// Without brackets for an IPv6 literal (as netrc's `machine` names it).
    public let host: String
    public let port: Int

    public init?(_ url: String) {
        guard let parts = URLParts(url) else { return nil }
        let scheme = parts.scheme.lowercased()
        let defaultPort: Int
        switch scheme {
        case "http": defaultPort = 80
        case "https": defaultPort = 443
        default: return nil
        }
        let hostPort = Substring(parts.hostAndPort)
        var host: Substring
        var portText: Substring?
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { return nil }
            host = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            let after = hostPort[hostPort.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = hostPort.lastIndex(of: ":") {
            host = hostPort[..<colon]
            portText = hostPort[hostPort.index(after: colon)...]
        } else {
            host = hostPort
        }
        guard !host.isEmpty else { return nil }
        var port = defaultPort
        // An empty port is the default one (RFC 3986 §3.2.3); anything else must be digits.
        if let portText, !portText.isEmpty {
            guard portText.count <= 5, portText.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                  let number = Int(portText), number <= 65535 else { return nil }
            port = number
        }
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = port
    }

    public var description: String {
        let shown = host.contains(":") ? "[\(host)]" : host
        return "\(scheme)://\(shown):\(port)"
    }
}
