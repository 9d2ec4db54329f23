import MirrorFS
import MirrorKit

/// Scalar formats: integers, strings, checksums, timestamps, modes and URLs.
extension ManifestRules {
    /// A non-negative integer written as plain decimal digits. Quoted numbers, signs, fractions,
    /// hex, underscores and leading zeros are refused: YAML 1.1 readers (PyYAML, libyaml-based
    /// tools) would read `0755` as octal and `1_000` as 1000, and a manifest must mean the same to
    /// every tool that reads it. `what` starts the message ("size must be …").
    func integer(_ node: YAMLTree.Ref, _ what: String) throws -> Int64 {
        guard tree.kind(node) == .scalar else { throw error(node, "\(what), got \(tree.describe(node))") }
        guard tree.isPlain(node) else {
            throw error(node, "\(what), got \(tree.describe(node)) (write numbers without quotes)")
        }
        let bytes = tree.bytes(node)
        guard !tree.isNull(node), bytes.allSatisfy(URLReference.isDigit) else {
            throw error(node, "\(what), got \(tree.describe(node))")
        }
        guard bytes.count == 1 || bytes.first != UInt8(ascii: "0") else {
            throw error(node, "\(what), got \(tree.describe(node)) (no leading zeros: YAML 1.1 reads them as octal)")
        }
        var value: Int64 = 0
        for digit in bytes {
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(Int64(digit - UInt8(ascii: "0")))
            guard !o1, !o2 else {
                throw error(node, "\(what), got \(tree.describe(node)), which is too large (the maximum is \(Int64.max))")
            }
            value = sum
        }
        return value
    }

    /// Any scalar but null, as its text (plain scalars included: `path: 2024` is the file "2024").
    func string(_ node: YAMLTree.Ref, _ what: String) throws -> String {
        guard tree.kind(node) == .scalar, !tree.isNull(node) else {
            throw error(node, "\(what), got \(tree.describe(node))")
        }
        return tree.string(node)
    }

    /// Exactly `2 × byteCount` hex digits, either case (the spec: checksums are case-insensitive).
    func digest(_ node: YAMLTree.Ref, key: String, byteCount: Int) throws -> Digest {
        var what: String { "\(key) must be \(byteCount * 2) hex digits" }  // built only for errors
        guard tree.kind(node) == .scalar, !tree.isNull(node) else {
            throw error(node, "\(what), got \(tree.describe(node))")
        }
        let bytes = tree.bytes(node)
        guard bytes.count == byteCount * 2 else {
            let found = tree.string(node).unicodeScalars.count
            throw error(node, "\(what), found \(found) character\(found == 1 ? "" : "s")")
        }
        // Decode straight into the manifest's digest blocks, one pass without a branch per
        // digit (10^6 entries: 0.16 s of the manifest's read on this loop before); a non-hex byte
        // anywhere is found after, and where it is then.
        var badPosition: Int?
        let digest = bytes.withUnsafeBufferPointer { digits in
            arena.digest(count: byteCount) { out in
                guard let d = digits.baseAddress, let o = out.baseAddress else { return false }
                var invalid: UInt8 = 0
                for k in 0 ..< byteCount {
                    let high = ManifestRules.nibble(d[2 &* k]), low = ManifestRules.nibble(d[2 &* k &+ 1])
                    invalid |= high | low
                    o[k] = high << 4 | low & 0x0f
                }
                guard invalid & 0xf0 != 0 else { return true }
                badPosition = (0 ..< 2 * byteCount).first { ManifestRules.nibble(d[$0]) >= 16 }
                return false
            }
        }
        guard let digest else {
            let position = badPosition ?? 0
            let text = tree.string(node)
            let bad = text.unicodeScalars.first { !$0.isASCII || ManifestRules.hexValue(UInt8($0.value)) == nil }
            let shown = bad.map { quoted(String(Character($0))) } ?? "?"
            throw error(node, "\(what) (0-9, a-f), found the non-hex character \(shown) at position \(position + 1)")
        }
        return digest
    }

    /// ``hexValue(_:)`` without a branch per case (10^6 entries are 64 million digits): 0xff for
    /// a byte that is not a hex digit.
    @inline(__always)
    static func nibble(_ c: UInt8) -> UInt8 {
        let digit = c &- 48, letter = (c | 0x20) &- 97  // `| 0x20`: A-F as a-f
        return digit < 10 ? digit : letter < 6 ? letter &+ 10 : 0xff
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    func timestamp(_ node: YAMLTree.Ref, key: String = "mtime") throws -> FileTime {
        guard tree.kind(node) == .scalar, !tree.isNull(node) else {
            throw error(node, "\(key) must be an RFC 3339 timestamp like \"2026-11-01T12:00:00Z\", got \(tree.describe(node))")
        }
        switch RFC3339.parse(bytes: tree.bytes(node)) {
        case .success(let time): return time
        case .failure(let failure): throw error(node, "\(key) \(quoted(tree.string(node))) \(failure.reason)")
        }
    }

    /// `0[0-7]{3}`, quoted or plain (plain `0644` is the text "0644" here, not YAML 1.1's octal
    /// 420). A fourth digit would carry setuid/setgid/sticky bits, which a download must never set.
    func modeValue(_ node: YAMLTree.Ref) throws -> UInt32 {
        let message = "mode must be an octal string like \"0644\" (no setuid, setgid or sticky bits), got "
        guard tree.kind(node) == .scalar, !tree.isNull(node) else { throw error(node, message + tree.describe(node)) }
        let b = tree.bytes(node)
        guard b.count == 4, b.first == UInt8(ascii: "0"),
              b.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "7")).contains($0) }) else {
            throw error(node, message + quoted(tree.string(node)))
        }
        return b.dropFirst().reduce(0) { $0 << 3 | UInt32($1 - UInt8(ascii: "0")) }
    }

    // MARK: URLs

    static let allowedSchemes = ["https", "http", "file"]

    /// `base_url` and each mirror: an absolute URL with an allowed scheme, ending in "/" (RFC 3986
    /// §5.2.3 drops whatever follows the base's last "/", so without it a segment would vanish).
    func baseURLValue(_ node: YAMLTree.Ref, key: String) throws -> String {
        let url = try string(node, "\(key) must be an absolute URL ending in \"/\"")
        let parts = try checkURL(url, node, key: key)
        guard parts.scheme != nil else {
            throw error(node, "\(key) must be an absolute URL (https://, http:// or file://), got \(quoted(redactedURL(url)))")
        }
        guard parts.query == nil, parts.fragment == nil else {
            throw error(node, "\(key) \(quoted(redactedURL(url))) must not have a query (\"?\") or fragment (\"#\")")
        }
        guard url.hasSuffix("/") else {
            throw error(node, "\(key) \(quoted(redactedURL(url))) must end with \"/\" (relative urls resolve against it, RFC 3986 §5.2)")
        }
        return url
    }

    /// An entry's `url`: absolute (allowed scheme) is used as is; anything else must be a valid
    /// relative reference, resolved later against `base_url` and the mirrors.
    func entryURL(_ node: YAMLTree.Ref) throws -> ManifestEntry.Location {
        let url = try string(node, "url must be a URL string")
        guard !url.isEmpty else { throw error(node, "url must not be empty (omit it to fetch base_url + path)") }
        let parts = try checkURL(url, node, key: "url")
        return parts.scheme == nil ? .relative(url) : .absolute(url)
    }

    /// Rules every URL obeys: no whitespace or control characters (they must be percent-encoded),
    /// a valid RFC 3986 reference, an allowed scheme when there is one, and a host for http(s).
    func checkURL(_ url: String, _ node: YAMLTree.Ref, key: String) throws -> URLReference.Components {
        for scalar in url.unicodeScalars
        where scalar.value <= 0x20 || (0x7f...0x9f).contains(scalar.value) || scalar.properties.isWhitespace {
            throw error(node, "\(key) \(quoted(redactedURL(url))) contains whitespace or a control character; percent-encode it (a space is %20)")
        }
        guard let parts = URLReference.split(url) else {
            throw error(node, "\(key) \(quoted(redactedURL(url))) is not a valid URL: the text before \":\" is not a scheme")
        }
        guard let scheme = parts.scheme?.lowercased() else { return parts }
        guard ManifestRules.allowedSchemes.contains(scheme) else {
            throw error(node, "\(key) \(quoted(redactedURL(url))) uses the scheme \(quoted(scheme)); allowed schemes: "
                        + ManifestRules.allowedSchemes.joined(separator: ", "))
        }
        if scheme == "file" {
            guard parts.path.hasPrefix("/") else {
                throw error(node, "\(key) \(quoted(redactedURL(url))) must have an absolute path, like file:///srv/data/")
            }
        } else if ManifestRules.host(of: parts.authority ?? "").isEmpty {
            throw error(node, "\(key) \(quoted(redactedURL(url))) has no host; expected \(scheme)://HOST/...")
        }
        return parts
    }

    /// The host part of an authority (§3.2): without userinfo and port; IPv6 literals in brackets.
    static func host(of authority: String) -> Substring {
        var rest = Substring(authority)
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        if rest.hasPrefix("[") { return rest.firstIndex(of: "]").map { rest[...$0] } ?? rest }
        return rest.firstIndex(of: ":").map { rest[..<$0] } ?? rest
    }

    /// " (did you mean "x"?)" when an unknown key is one edit away from an allowed one, or differs
    /// only by case or "-" for "_"; otherwise "".
    func suggestion(_ name: String, _ allowed: [String]) -> String {
        let normalized = String(name.lowercased().map { $0 == "-" ? "_" : $0 })
        for candidate in allowed where candidate == normalized || ManifestRules.editDistance(name, candidate) <= 1
            || ManifestRules.isTransposition(name, candidate) {
            return " (did you mean \(quoted(candidate))?)"
        }
        return ""
    }

    static func isTransposition(_ a: String, _ b: String) -> Bool {
        let x = Array(a.unicodeScalars), y = Array(b.unicodeScalars)
        guard x.count == y.count else { return false }
        let diffs = x.indices.filter { x[$0] != y[$0] }
        return diffs.count == 2 && diffs[1] == diffs[0] + 1 && x[diffs[0]] == y[diffs[1]] && x[diffs[1]] == y[diffs[0]]
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let x = Array(a.unicodeScalars), y = Array(b.unicodeScalars)
        guard !x.isEmpty, !y.isEmpty, abs(x.count - y.count) <= 2, x.count < 64, y.count < 64 else {
            return max(x.count, y.count)
        }
        var row = Array(0 ... y.count)
        for i in 1 ... x.count {
            var previous = row[0]
            row[0] = i
            for j in 1 ... y.count {
                let old = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (x[i - 1] == y[j - 1] ? 0 : 1))
                previous = old
            }
        }
        return row[y.count]
    }
}
