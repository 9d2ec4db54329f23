import Foundation
import MirrorCore
import MirrorModel

/// Builds manifest YAML (spec: `docs/manifest.md`) for tests.
///
/// Tests write manifests as text, not through `MirrorCore`'s types, because the manifest parser is
/// itself under test: the text must be what a user would write. Paths and URLs are always emitted
/// as YAML double-quoted scalars quoted as the product quotes them (``quoted(_:)``), so names with
/// spaces, `#`, `: `, quotes, leading dashes or UTF-8 are never misread as YAML syntax; control
/// characters are escaped (`\x09`, `\x01`, `\u0085`) so a test can hand the parser a path
/// containing them and check that it is rejected.
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

    /// `text` as a YAML double-quoted scalar, exactly as `mirror manifest create` writes it
    /// (``ManifestWriter/quoted(_:)``), so what the tests publish is what the product publishes.
    /// Also handy for `extra` values.
    public static func quoted(_ text: String) -> String {
        ManifestWriter.quoted(text)
    }
}
