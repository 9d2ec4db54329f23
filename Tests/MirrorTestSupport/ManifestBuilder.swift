import Foundation

/// Builds manifest YAML (spec: `docs/manifest.md`) for tests.
///
/// Tests write manifests as text, not through `MirrorCore`'s types, because the manifest parser is
/// itself under test: the text must be what a user would write. Paths and URLs are always emitted
/// as YAML double-quoted scalars, so names with spaces, `#`, `: `, quotes, leading dashes or UTF-8
/// are never misread as YAML syntax; control characters are escaped (`\t`, `\x01`, `\u0085`) so
/// a test can hand the parser a path containing them and check that it is rejected.
public struct ManifestBuilder {
    public var baseURL: String?
    /// Optional `mirrors:` list (base URLs, emitted quoted).
    public var mirrors: [String] = []
    /// Optional `destination:` value (emitted quoted).
    public var destination: String?
    public var version: Int = 1
    private var entries: [String] = []

    public init(baseURL: String?) {
        self.baseURL = baseURL
    }

    /// Adds one entry. `extra` holds further keys of the entry (`mtime`, `mode`, `sha512`, or a
    /// misspelt key to test rejection); their values are inserted verbatim as YAML, in key order,
    /// so quote them yourself where YAML needs it (`ManifestBuilder.quoted("0644")`).
    public mutating func add(path: String, size: Int64, sha256: String, url: String? = nil, extra: [String: String] = [:]) {
        var lines = ["  - path: \(Self.quoted(path))"]
        if let url = url { lines.append("    url: \(Self.quoted(url))") }
        lines.append("    size: \(size)")
        lines.append("    sha256: \(sha256)")
        for key in extra.keys.sorted() {
            lines.append("    \(key): \(extra[key] ?? "")")
        }
        entries.append(lines.joined(separator: "\n"))
    }

    /// The manifest text (ends with a newline).
    public var yaml: String {
        var out = "version: \(version)\n"
        if let baseURL = baseURL { out += "base_url: \(Self.quoted(baseURL))\n" }
        if !mirrors.isEmpty {
            out += "mirrors:\n" + mirrors.map { "  - \(Self.quoted($0))\n" }.joined()
        }
        if let destination = destination { out += "destination: \(Self.quoted(destination))\n" }
        if entries.isEmpty {
            out += "files: []\n"
        } else {
            out += "files:\n" + entries.joined(separator: "\n") + "\n"
        }
        return out
    }

    /// Writes ``yaml`` to `path` (UTF-8, replacing any existing file).
    public func write(to path: String) throws {
        do {
            try Data(yaml.utf8).write(to: URL(fileURLWithPath: path))
        } catch {
            throw HarnessError("cannot write manifest to \(path): \(error)")
        }
    }

    /// `text` as a YAML double-quoted scalar: `\` and `"` are backslash-escaped, C0 controls, DEL
    /// and C1 controls become `\t`/`\n`/`\r` or `\xHH`/`\uHHHH`; other characters (UTF-8) stay as
    /// they are. Also handy for `extra` values.
    public static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\t": out += "\\t"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            default:
                let v = scalar.value
                if v < 0x20 || v == 0x7f {
                    out += "\\x" + hex(v, digits: 2)
                } else if (0x80...0x9f).contains(v) || v == 0x2028 || v == 0x2029 || v == 0xfeff {
                    // C1 controls, line/paragraph separators and BOM are not printable in YAML 1.1.
                    out += "\\u" + hex(v, digits: 4)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let s = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }
}
