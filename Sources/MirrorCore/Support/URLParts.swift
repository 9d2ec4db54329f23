/// The pieces of an absolute URL that credentials and per-host bookkeeping need, located without
/// parsing the rest (RFC 3986 §3.2: the authority runs from `//` to the first `/`, `?` or `#`,
/// and user-info ends at its last `@`).
struct URLParts {
    let url: String
    /// `scheme` (without `://`).
    let scheme: Substring
    /// `user:password@host:port`.
    let authority: Substring
    /// The user-info and its `@`, if any.
    let userInfo: Substring?

    init?(_ url: String) {
        guard let schemeEnd = url.firstRange(of: "://") else { return nil }
        self.url = url
        scheme = url[..<schemeEnd.lowerBound]
        let rest = url[schemeEnd.upperBound...]
        let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[rest.startIndex..<end]
        self.authority = authority
        userInfo = authority.lastIndex(of: "@").map { authority[authority.startIndex...$0] }
    }

    /// `host:port` without user-info.
    var hostAndPort: Substring {
        guard let userInfo else { return authority }
        return authority[userInfo.endIndex...]
    }
}

/// `scheme://host:port`, lowercased, for remembering that a host is unreachable for the rest of a run.
func hostKey(of url: String) -> String {
    guard let parts = URLParts(url) else { return url }
    return parts.scheme.lowercased() + "://" + parts.hostAndPort.lowercased()
}

extension String {
    /// Without leading and trailing whitespace.
    var trimmingSpaces: String {
        var s = Substring(self)
        while let c = s.first, c.isWhitespace { s.removeFirst() }
        while let c = s.last, c.isWhitespace { s.removeLast() }
        return String(s)
    }
}
