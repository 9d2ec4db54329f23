/// The pieces of an absolute URL that credentials and per-host bookkeeping need, located without
/// parsing the rest (RFC 3986 §3.2: the authority runs from `//` to the first `/`, `?` or `#`,
/// and user-info ends at its last `@`).
package struct URLParts {
    let url: String
    /// `scheme` (without `://`).
    package let scheme: Substring
    /// `user:password@host:port`.
    let authority: Substring
    /// The user-info and its `@`, if any.
    package let userInfo: Substring?

    /// Works on Unicode scalars, as curl reads the URL's bytes: a `/` or `@` followed by a
    /// combining mark is one `Character` but still a delimiter, and missing it would leave a
    /// password unmasked.
    package init?(_ url: String) {
        guard let schemeEnd = schemeSeparator(in: url) else { return nil }
        let scalars = url.unicodeScalars
        self.url = url
        scheme = Substring(scalars[..<schemeEnd.lowerBound])
        let rest = scalars[schemeEnd.upperBound...]
        let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[rest.startIndex..<end]
        self.authority = Substring(authority)
        userInfo = authority.lastIndex(of: "@").map { Substring(authority[authority.startIndex...$0]) }
    }

    /// `host:port` without user-info.
    package var hostAndPort: Substring {
        guard let userInfo else { return authority }
        return Substring(authority.unicodeScalars[userInfo.endIndex...])
    }
}

/// `scheme://host:port`, lowercased, for remembering that a host is unreachable for the rest of a run.
package func hostKey(of url: String) -> String {
    guard let parts = URLParts(url) else { return url }
    return parts.scheme.lowercased() + "://" + parts.hostAndPort.lowercased()
}

extension String {
    /// Without leading and trailing whitespace.
    package var trimmingSpaces: String {
        var s = Substring(self)
        while let c = s.first, c.isWhitespace { s.removeFirst() }
        while let c = s.last, c.isWhitespace { s.removeLast() }
        return String(s)
    }
}
