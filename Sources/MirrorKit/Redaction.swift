/// Credentials never reach an output: console, `--json`, `--log-file`, `--metrics-file`, the
/// journal's `url=` and `error=` fields, `mirror status`, error messages (docs/cli.md, "Output").
///
/// Both functions below mask by parsing, with one rule (RFC 3986 §3.2 and §3.2.1): after
/// `scheme://`, the authority runs to the first `/`, `?` or `#`, and the user-info is everything
/// in it up to its *last* `@`. The user-info may hold `)`, `'`, `"`, `:`, `!`, `$`, `&`, `*`, `+`,
/// `,`, `;`, `=` and percent-encoded bytes (§3.2.1 `userinfo = *( unreserved / pct-encoded /
/// sub-delims / ":" )`), so no character of it may end the URL early: an earlier version stopped
/// at quotes and `)` and printed what followed in clear. A literal `@` in a password (which
/// should be `%40`) is masked too, since only the last `@` ends the user-info: that is the WHATWG
/// URL reading, and it covers libcurl's (`parse_hostname_login` splits at the first `@`, so what
/// it takes for user-info is always a prefix of what is masked here).

/// Masks the user-info of one URL (`https://user:secret@host/` → `https://***@host/`). The whole
/// string is the URL: only `/`, `?` and `#` end its authority, even a space (which a manifest URL
/// cannot hold, but a command-line argument can) is inside. Anything without `://` is returned as is.
public func redactedURL(_ url: String) -> String {
    maskingUserInfo(in: url, authorityEndsAtSpace: false)
}

/// Masks the user-info of every URL inside free text (an error message or log line that quotes a
/// URL), by the rule of ``redactedURL(_:)``, with one more end for an authority: whitespace, which
/// no URL holds unencoded (§2: it is not a URI character) and which separates the URL from the
/// words after it. Quotes, brackets, parentheses and other controls do not end it, since a
/// password may hold them (the first three legally).
///
/// Callers that hold a URL mask it with ``redactedURL(_:)`` before putting it into text (a URL
/// given on the command line may hold a literal space); this function is the net behind them,
/// applied by every sink (`RunLog`, `ConsoleReport`, `SyncDocument`, the journal).
public func redactingURLs(in text: String) -> String {
    maskingUserInfo(in: text, authorityEndsAtSpace: true)
}

/// The one implementation behind both: for each `://`, finds the end of the authority that
/// follows and replaces everything up to the authority's last `@` with `***`. Whatever precedes
/// `://` counts as a scheme (masking an odd text is harmless; missing a URL is not). Works on
/// Unicode scalars, so no character of the text is altered but the masked ones.
func maskingUserInfo(in text: String, authorityEndsAtSpace: Bool) -> String {
    // Most lines: no copy. Searched as bytes: a `/` followed by a combining mark is one
    // `Character`, so a search by Characters would miss the URL the loop below masks.
    guard schemeSeparator(in: text) != nil else { return text }
    let scalars = Array(text.unicodeScalars)
    var out = String.UnicodeScalarView()
    var copied = 0  // scalars[..<copied] are in `out`
    var i = 0
    while i + 2 < scalars.count {
        guard scalars[i] == ":", scalars[i + 1] == "/", scalars[i + 2] == "/" else { i += 1; continue }
        let authorityStart = i + 3
        var end = authorityStart
        var lastAt: Int?
        while end < scalars.count {
            let c = scalars[end]
            if c == "/" || c == "?" || c == "#" { break }
            if authorityEndsAtSpace && c.properties.isWhitespace { break }
            if c == "@" { lastAt = end }
            end += 1
        }
        if let lastAt {
            out.append(contentsOf: scalars[copied ..< authorityStart])
            out.append(contentsOf: "***".unicodeScalars)
            copied = lastAt
        }
        i = end
    }
    guard copied > 0 else { return text }
    out.append(contentsOf: scalars[copied...])
    return String(out)
}

/// The first `://` in `text`'s bytes (a `/` followed by a combining mark is one `Character`, but
/// still a `/` to curl), or nil. Its bounds are ASCII, so they are indices of the Unicode scalar
/// view too. A plain loop: the standard library's generic `firstRange(of:)` on the UTF-8 view
/// costs microseconds a call in type metadata lookups, and this runs for every line the tool
/// prints (10^6 entries' lines: 3.5 s more).
func schemeSeparator(in text: String) -> Range<String.Index>? {
    let bytes = text.utf8
    var matched = 0
    var i = bytes.startIndex
    while i < bytes.endIndex {
        switch (matched, bytes[i]) {
        case (0, UInt8(ascii: ":")), (1, UInt8(ascii: "/")): matched += 1
        case (2, UInt8(ascii: "/")): return bytes.index(i, offsetBy: -2) ..< bytes.index(after: i)
        case (_, UInt8(ascii: ":")): matched = 1
        default: matched = 0
        }
        i = bytes.index(after: i)
    }
    return nil
}
