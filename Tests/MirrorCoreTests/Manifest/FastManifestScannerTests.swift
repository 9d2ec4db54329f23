import Foundation
@testable import MirrorModel
import Testing
@testable import MirrorCore
import MirrorTestSupport

/// The fast reader must build exactly the tree libyaml builds (kinds, styles, positions, text),
/// for every input it accepts, and leave everything else to libyaml.
@Suite struct FastManifestScannerTests {
    static let sha = ManifestFixture.sha256

    /// Manifests in the fast reader's subset: it must accept each one.
    static let accepted: [String] = [
        ManifestFixture.oneEntry(),
        // What `mirror manifest create` writes: quoted paths.
        "version: 1\nbase_url: \"http://127.0.0.1:8080/media/\"\nfiles:\n  - path: \"a b/c.bin\"\n    size: 3\n    sha256: \(sha)\n",
        // Comments everywhere, blank lines, an indentless sequence, a last line without newline.
        "# header\n\nversion: 1   # v\nbase_url: https://x.org/a/\nfiles:   # list\n- path: a\n  size: 0\n\n  # between\n  sha256: \(sha)\n- path: videos/é/intro.mp4\n  size: 7\n  sha256: \(sha)",
        // Mirrors (a list of scalars), destination, every entry field, quoted mode.
        "version: 1\nbase_url: https://a.org/\nmirrors:\n  - https://b.org/\n  - https://c.org/x/\ndestination: /srv/media\nfiles:\n  - path: x.img\n    url: https://d.org/x.img?sig=1&y=2\n    size: 10\n    sha256: \(sha)\n    sha512: \(ManifestFixture.sha512)\n    mtime: 2026-11-01T12:00:00Z\n    mode: \"0644\"\n",
        // Values the rules refuse: the positions of their errors must match too.
        ManifestFixture.oneEntry(size: "-5"),
        ManifestFixture.oneEntry(size: "1.5"),
        ManifestFixture.oneEntry(path: "../escape"),
        ManifestFixture.oneEntry(path: ".MIRROR/x"),
        ManifestFixture.oneEntry(sha256: "xyz"),
        ManifestFixture.oneEntry("    sha265: \(sha)"),
        "version: 2\nfiles:\n  - path: a\n    size: ~\n    sha256: null\n",
        "version: 1\nfiles: # none yet\n  - path: a\n    size: 1\n    sha256: \(sha)\nextra:\n  nested:\n    deeper: value\n",
        "version: 1\nfiles:\n  - path: a\n    size: 1\n    sha256: \(sha)\n    mirrors:\n    - https://m.org/\n  - path: b\n    size: 1\n    sha256: \(sha)\n",
    ]

    /// Outside the subset (or invalid YAML): the fast reader must decline each one.
    static let declined: [String] = [
        "", "# only a comment\n", "---\nversion: 1\n", "version: 1\r\nfiles: []\r\n", "version:\t1\n",
        "version: 1\nfiles: []\n", "version: 1\nbase_url: &b https://x/\n", "version: 1\nkey: *b\n",
        "version: 1\nkey: 'single'\n", "version: 1\nkey: \"esc\\\"aped\"\n", "version: 1\nkey: !!str 1\n",
        "version: 1\nkey: a b\n", "version: 1\nkey: a #b\n".replacingOccurrences(of: " #b", with: "#b"),
        "version: 1\nkey:\nother: 2\n", "version: 1\nkey: value\n  continued\n", "version: 1\nkey: |\n  block\n",
        "\u{FEFF}version: 1\n", "version: 1\nkey: a: b\n", "\"quoted key\": 1\n", "- a\n- b\n",
        "version: 1\nfiles:\n  -\n    path: a\n", "version: 1\nkey: \"open\n", "version: 1\nkey: ?x\n",
        "version: 1\nversion: 2\n",  // a duplicate key: the builder's error, left to libyaml
    ]

    func trees(_ text: String) throws -> (fast: YAMLTree?, libyaml: YAMLTree?) {
        let bytes = Array(text.utf8)
        let fast = bytes.withUnsafeBufferPointer { FastManifestScanner.tree(from: $0) }
        let reference = try? YAMLParser.parse(bytes, fastPath: false)
        return (fast, reference)
    }

    /// Node by node: kind, style, position, and the text or children it holds.
    func describe(_ tree: YAMLTree) -> [String] {
        var out: [String] = ["root \(tree.root)"]
        for (i, node) in tree.nodes.enumerated() {
            var text = "\(i) \(node.kind) plain=\(node.isPlain) \(node.line):\(node.column)"
            switch node.kind {
            case .scalar: text += " \(String(decoding: tree.arena[node.start..<node.start + node.count], as: UTF8.self).debugDescription)"
            case .alias: text += " -> \(node.start)"
            case .sequence, .mapping: text += " [\(tree.children[node.start..<node.start + node.count].map(String.init).joined(separator: ","))]"
            }
            out.append(text)
        }
        return out
    }

    @Test(arguments: accepted)
    func acceptedManifestsGiveLibyamlsTree(text: String) throws {
        let (fast, reference) = try trees(text)
        let fastTree = try #require(fast, "the fast reader declined:\n\(text)")
        let libyamlTree = try #require(reference, "libyaml has no tree for:\n\(text)")
        #expect(describe(fastTree) == describe(libyamlTree))
    }

    @Test(arguments: declined)
    func otherInputIsLeftToLibyaml(text: String) throws {
        #expect(try trees(text).fast == nil, "accepted:\n\(text)")
    }

    /// The loader's result and errors are the same with and without the fast reader, for every
    /// manifest above and for a large generated one.
    @Test func theLoaderAgreesWithAndWithoutTheFastReader() throws {
        var texts = Self.accepted + Self.declined
        var big = "version: 1\nbase_url: https://example.org/media/\nfiles:\n"
        for i in 0..<2000 { big += "  - path: d\(i % 7)/f\(i).dat\n    size: \(i)\n    sha256: \(Self.sha)\n" }
        texts.append(big)
        for text in texts {
            let bytes = Array(text.utf8)
            let fast = Result { try ManifestLoader.parseTree(bytes, fastPath: true) }
            let slow = Result { try ManifestLoader.parseTree(bytes, fastPath: false) }
            switch (fast, slow) {
            case (.success(let a), .success(let b)):
                #expect(describe(a) == describe(b), "\(text.prefix(200))")
            case (.failure(let a), .failure(let b)):
                #expect("\(a)" == "\(b)", "\(text.prefix(200))")
            default:
                Issue.record("one reader failed, the other did not: \(fast) vs \(slow) for\n\(text.prefix(200))")
            }
        }
    }

    /// Loading a file lets the scanner give back the pages it has read; when it then meets what
    /// only libyaml reads (here a single-quoted path in the last entry), the file is read again
    /// and the result is exactly what parsing the bytes gives, entries and errors alike.
    @Test func givingBackReadPagesChangesNoResult() throws {
        let dir = try TemporaryDirectory()
        var head = "version: 1\nbase_url: https://example.org/media/\nfiles:\n"
        for i in 0..<3000 { head += "  - path: d\(i % 7)/f\(i).dat\n    size: \(i)\n    sha256: \(Self.sha)\n" }
        let tails = ["", "  - path: 'last.dat'\n    size: 1\n    sha256: \(Self.sha)\n",
                     "  - path: 'd1/f1.dat'\n    size: 1\n    sha256: \(Self.sha)\n"]
        for (n, tail) in tails.enumerated() {
            let path = dir.path("m\(n).yaml")
            try Data((head + tail).utf8).write(to: URL(fileURLWithPath: path))
            var reader = ManifestLoader.Reader()
            reader.releaseStep = 4096
            let loaded = Result { try ManifestLoader.load(path: path, displayName: "m.yaml", reader: reader) }
            let parsed = Result { try ManifestLoader.parse(Array((head + tail).utf8), sourceName: "m.yaml") }
            switch (loaded, parsed) {
            case (.success(let a), .success(let b)):
                #expect(a.entries == b.entries && a.entries.count == 3000 + (tail.isEmpty ? 0 : 1))
            case (.failure(let a), .failure(let b)):
                #expect("\(a)" == "\(b)" && n == 2, "\(a)")
            default:
                Issue.record("one way failed, the other did not: \(loaded) vs \(parsed)")
            }
        }
    }
}

extension ManifestLoader {
    /// The YAML tree with or without the fast reader (tests compare both).
    static func parseTree(_ bytes: [UInt8], fastPath: Bool) throws -> YAMLTree {
        var text = bytes
        return try parseTree(&text, sourceName: "m.yaml", reader: Reader(fastPath: fastPath, streaming: false)).tree
    }
}
