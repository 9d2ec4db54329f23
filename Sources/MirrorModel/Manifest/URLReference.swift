/// URL references as RFC 3986 defines them: splitting (§3, Appendix B), resolution against a base
/// (§5.2) and percent-encoding of path components (§2.1, §3.3).
///
/// Implemented here rather than with Foundation's `URL(string:relativeTo:)` because Foundation's
/// behaviour differs between platforms and versions (it has followed RFC 1808 in places), while the
/// manifest spec promises RFC 3986 resolution and tests pin it down.
public enum URLReference {
    /// The five components of §3. `nil` means "undefined", which §5.2 distinguishes from empty.
    struct Components: Equatable {
        var scheme: String?
        var authority: String?
        var path: String
        var query: String?
        var fragment: String?
    }

    /// Splits a URI reference per Appendix B, with one stricter rule: text before the first ":" is a
    /// scheme only if it matches §3.1 `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`; a colon in the
    /// first segment otherwise makes the reference invalid (§4.2), and nil is returned.
    static func split(_ s: String) -> Components? {
        let b = Array(s.utf8)
        var i = 0
        var scheme: String?
        if let colon = b.firstIndex(where: { $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "/")
                || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }), b[colon] == UInt8(ascii: ":") {
            guard isScheme(b[0 ..< colon]) else { return nil }
            scheme = String(decoding: b[0 ..< colon], as: UTF8.self)
            i = colon + 1
        }
        func take(until stops: [UInt8]) -> String {
            let start = i
            while i < b.count, !stops.contains(b[i]) { i += 1 }
            return String(decoding: b[start ..< i], as: UTF8.self)
        }
        var authority: String?
        if i + 1 < b.count, b[i] == UInt8(ascii: "/"), b[i + 1] == UInt8(ascii: "/") {
            i += 2
            authority = take(until: [UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#")])
        }
        let path = take(until: [UInt8(ascii: "?"), UInt8(ascii: "#")])
        var query: String?
        if i < b.count, b[i] == UInt8(ascii: "?") {
            i += 1
            query = take(until: [UInt8(ascii: "#")])
        }
        var fragment: String?
        if i < b.count, b[i] == UInt8(ascii: "#") {
            fragment = String(decoding: b[(i + 1)...], as: UTF8.self)
        }
        return Components(scheme: scheme, authority: authority, path: path, query: query, fragment: fragment)
    }

    static func isScheme(_ b: ArraySlice<UInt8>) -> Bool {
        guard let first = b.first, isAlpha(first) else { return false }
        return b.allSatisfy { isAlpha($0) || isDigit($0) || $0 == UInt8(ascii: "+")
            || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
    }

    /// RFC 3986 §5.2 resolution of a relative reference against an absolute base URL that ends in
    /// "/". Returns nil if it cannot (base without a scheme, or either side not a URI reference).
    ///
    /// Follows §5.2.2 ("strict" parser: a reference with a scheme is used as is), §5.2.3 (merge) and
    /// §5.2.4 (remove_dot_segments), and recomposes per §5.3.
    public static func resolve(_ reference: String, against base: String) -> String? {
        join(reference, to: base) ?? resolveBySplitting(reference, against: base)
    }

    /// ``resolve(_:against:)`` step by step as §5.2 writes it, for every shape of reference.
    static func resolveBySplitting(_ reference: String, against base: String) -> String? {
        guard let r = split(reference), let b = split(base), b.scheme != nil else { return nil }
        var t = Components(scheme: nil, authority: nil, path: "", query: nil, fragment: r.fragment)
        if r.scheme != nil {
            t.scheme = r.scheme
            t.authority = r.authority
            t.path = removeDotSegments(r.path)
            t.query = r.query
        } else {
            if r.authority != nil {
                t.authority = r.authority
                t.path = removeDotSegments(r.path)
                t.query = r.query
            } else {
                if r.path.isEmpty {
                    t.path = b.path
                    t.query = r.query ?? b.query
                } else {
                    t.path = removeDotSegments(r.path.hasPrefix("/") ? r.path : merge(base: b, r.path))
                    t.query = r.query
                }
                t.authority = b.authority
            }
            t.scheme = b.scheme
        }
        return recompose(t)
    }

    /// The common case of ``resolve(_:against:)`` without splitting either side: a base with a
    /// scheme, no query or fragment, no dot segment, ending in "/", and a reference that is a plain
    /// relative path (not empty, no leading "/", no ":", "?" or "#", no "." or ".." segment).
    /// §5.2.2 then takes the base's scheme and authority, §5.2.3 appends the reference to the
    /// whole base path, and §5.2.4 has nothing to remove: the result is the two strings joined.
    /// A manifest's entries are nearly all of this shape, and splitting, merging and recomposing
    /// made some 24 heap allocations an entry (`heaptrack`, 5000 entries). nil: use the general path.
    static func join(_ reference: String, to base: String) -> String? {
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        guard base.utf8.last == slash, let first = reference.utf8.first, first != slash else { return nil }
        // Every "." or ".." segment starts right after a "/" (or at the start of the reference).
        func plain<Bytes: Sequence<UInt8>>(_ bytes: Bytes, segmentStart: Bool, colons: Bool) -> Bool {
            var atStart = segmentStart
            var dots = 0
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "?"), UInt8(ascii: "#"): return false
                case UInt8(ascii: ":") where !colons: return false
                case slash:
                    if atStart && (dots == 1 || dots == 2) { return false }
                    atStart = true
                    dots = 0
                case dot where atStart:
                    dots += 1
                default:
                    atStart = false
                    dots = 0
                }
            }
            return !(atStart && (dots == 1 || dots == 2))
        }
        // The base: a §3.1 scheme, then ":" and a rest that starts with "/" (a path with no
        // authority: "x:./" would lose its "." segment), and, with an authority ("//"), has a path
        // after it ("file://" has an empty one, which §5.2.3 merges as "/"). The rest is plain as
        // well; a ":" in it is the port or user information, or part of the path.
        var schemeEnd = base.utf8.startIndex
        var sawColon = false
        for index in base.utf8.indices {
            let byte = base.utf8[index]
            if byte == UInt8(ascii: ":") { schemeEnd = index; sawColon = true; break }
            let ok = index == base.utf8.startIndex ? isAlpha(byte)
                : isAlpha(byte) || isDigit(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == dot
            if !ok { return nil }
        }
        guard sawColon, schemeEnd != base.utf8.startIndex else { return nil }
        let rest = base.utf8[base.utf8.index(after: schemeEnd)...]
        guard rest.first == slash else { return nil }
        if rest.starts(with: [slash, slash]), !rest.dropFirst(2).contains(slash) { return nil }
        guard plain(rest, segmentStart: true, colons: true),
              plain(reference.utf8, segmentStart: true, colons: false) else { return nil }
        return base + reference
    }

    /// §5.2.3: the reference's path appended to all but the last segment of the base's path.
    static func merge(base: Components, _ path: String) -> String {
        if base.authority != nil && base.path.isEmpty { return "/" + path }
        let bp = Array(base.path.utf8)
        guard let slash = bp.lastIndex(of: UInt8(ascii: "/")) else { return path }
        return String(decoding: bp[...slash], as: UTF8.self) + path
    }

    /// §5.2.4 remove_dot_segments, step by step as the RFC writes it (rules A–E).
    static func removeDotSegments(_ path: String) -> String {
        let dot = UInt8(ascii: "."), slash = UInt8(ascii: "/")
        var input = ArraySlice(Array(path.utf8))
        var output: [UInt8] = []
        func starts(_ p: [UInt8]) -> Bool { input.starts(with: p) }
        func removeLastSegment() {
            if let last = output.lastIndex(of: slash) { output.removeSubrange(last...) } else { output.removeAll() }
        }
        while !input.isEmpty {
            if starts([dot, dot, slash]) {                       // A
                input = input.dropFirst(3)
            } else if starts([dot, slash]) {
                input = input.dropFirst(2)
            } else if starts([slash, dot, slash]) {              // B
                input = input.dropFirst(2)
            } else if input.elementsEqual([slash, dot]) {
                input = [slash]
            } else if starts([slash, dot, dot, slash]) {         // C
                input = input.dropFirst(3)
                removeLastSegment()
            } else if input.elementsEqual([slash, dot, dot]) {
                input = [slash]
                removeLastSegment()
            } else if input.elementsEqual([dot]) || input.elementsEqual([dot, dot]) {  // D
                input = []
            } else {                                             // E
                var end = input.startIndex
                if input[end] == slash { end += 1 }
                while end < input.endIndex, input[end] != slash { end += 1 }
                output.append(contentsOf: input[input.startIndex ..< end])
                input = input[end...]
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// §5.3 component recomposition.
    static func recompose(_ c: Components) -> String {
        var s = ""
        if let scheme = c.scheme { s += scheme + ":" }
        if let authority = c.authority { s += "//" + authority }
        s += c.path
        if let query = c.query { s += "?" + query }
        if let fragment = c.fragment { s += "#" + fragment }
        return s
    }

    /// Percent-encodes one path component (§2.1: `%` + two uppercase hex digits per UTF-8 byte).
    ///
    /// Kept as is: unreserved (§2.3: ALPHA DIGIT `-` `.` `_` `~`) and the sub-delims `! $ ' ( ) * ,`.
    /// Encoded although `pchar` allows them: `&` `+` `;` `=` (servers and frameworks give them
    /// meanings in paths: `+` as space, `;` as path parameters), `:` (in a first segment it would
    /// read as a scheme, §4.2) and `@`; and of course `/`, `%`, `?`, `#`, space, every other ASCII
    /// byte and every byte of a non-ASCII character.
    public static func encodePathComponent(_ s: String) -> String {
        percentEncode(s, keepingSlash: false)
    }

    /// A relative path, each component encoded as by `encodePathComponent` and joined by "/": the
    /// default `url` of an entry. One pass over the bytes gives the same result as splitting.
    package static func encodePath(_ path: String) -> String {
        percentEncode(path, keepingSlash: true)
    }

    private static func percentEncode(_ s: String, keepingSlash: Bool) -> String {
        let keep = URLReference.keep, hexDigits = URLReference.hexDigits  // statics read once, not per byte
        var source = s  // withUTF8 is mutating; a native string gives its bytes in place
        return source.withUTF8 { bytes in
            var length = 0
            for byte in bytes { length += keep[Int(byte)] || (keepingSlash && byte == UInt8(ascii: "/")) ? 1 : 3 }
            if length == bytes.count { return s }  // nothing to encode: share the storage
            // One allocation: the result is written straight into the new string's storage.
            return String(unsafeUninitializedCapacity: length) { out in
                var i = 0
                for byte in bytes {
                    if keep[Int(byte)] || (keepingSlash && byte == UInt8(ascii: "/")) {
                        out[i] = byte
                        i += 1
                    } else {
                        out[i] = UInt8(ascii: "%")
                        out[i + 1] = hexDigits[Int(byte >> 4)]
                        out[i + 2] = hexDigits[Int(byte & 0xf)]
                        i += 3
                    }
                }
                return i
            }
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    /// Bytes `encodePathComponent` leaves alone, as a 256-entry table (one load per byte).
    private static let keep: [Bool] = (0 ..< 256).map { i in
        let c = UInt8(i)
        return isAlpha(c) || isDigit(c) || "-._~!$'()*,".utf8.contains(c)
    }

    static func isAlpha(_ c: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(c) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(c)
    }

    static func isDigit(_ c: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) }
}
