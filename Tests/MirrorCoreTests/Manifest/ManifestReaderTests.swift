import Foundation
@testable import MirrorModel
import Testing
@testable import MirrorCore

/// The streamed reader (entries built while the YAML is read, no whole-document tree:
/// ``ManifestEntryStream``) must give what the whole tree gives: the same manifest, and for a
/// broken one the same first error (line, column, message), with libyaml and with the fast reader.
@Suite struct ManifestReaderTests {
    static let sha = ManifestFixture.sha256
    static let entry = "    size: 1\n    sha256: \(sha)\n"

    /// Inputs that exercise the order of errors and the nodes a streamed item may share.
    static let streamingCases: [String] = [
        // Anchors inside entries, used by later entries (the nodes must outlive their item).
        "version: 1\nbase_url: https://e.org/\nfiles:\n  - path: a\n    size: &s 1\n    sha256: &h \(sha)\n"
            + "    mtime: &t 2026-11-01T12:00:00Z\n  - path: b\n    size: *s\n    sha256: *h\n    mtime: *t\n",
        // A whole entry anchored and repeated: a duplicate path, found through the alias.
        "version: 1\nbase_url: https://e.org/\nfiles:\n  - &e {path: a, size: 1, sha256: \(sha)}\n  - *e\n",
        // The files list anchored and shown to the rules again as the mirrors.
        "version: 1\nbase_url: https://e.org/\nfiles: &f\n  - path: a\n\(entry)mirrors: *f\n",
        // files before base_url; relative urls without base_url, before and after another error.
        "version: 1\nfiles:\n  - path: a\n\(entry)  - path: b\n    size: -1\n    sha256: \(sha)\nbase_url: https://e.org/\n",
        "version: 1\nfiles:\n  - path: a\n\(entry)  - path: b\n    size: -1\n    sha256: \(sha)\n",
        "version: 1\nfiles:\n  - path: a\n    url: https://e.org/a\n\(entry)  - path: b\n    size: -1\n    sha256: \(sha)\n",
        "version: 1\nfiles:\n  - path: a\n    url: x/a\n\(entry)",
        // An entry error, then something the rules check earlier or YAML refuses.
        "version: 1\nbase_url: https://e.org/\nfiles:\n  - path: ../a\n\(entry)unknown: 1\n",
        "version: 1\nbase_url: https://e.org/\nfiles:\n  - path: ../a\n\(entry)version: 2\n",
        "files:\n  - path: ../a\n\(entry)version: 2\n",
        "files:\n  - path: ../a\n\(entry)destination: ''\nversion: 1\n",
        "version: 1\nbase_url: https://e.org/\nfiles:\n  - path: ../a\n\(entry)  - path: b\n    size: 1\n    size: 2\n",
        "version: 1\nbase_url: https://e.org/\nfiles:\n  - path: ../a\n\(entry)  - path: b\n    size: [1\n",
        "version: 1\nbase_url: https://e.org/\nfiles:\n  - path: a\n\(entry)files: []\n",
        "version: 1\nbase_url: https://e.org/\nfiles:\n  - path: a\n\(entry)  - path: a\n\(entry)",
        "version: 1\nbase_url: https://e.org/\nfiles:\n  - path: a\n\(entry)  - path: a/b\n\(entry)",
        // Items that are not mappings, and files that is not a list or is reached by an alias.
        "version: 1\nbase_url: https://e.org/\nfiles:\n  - just a string\n  - [1, 2]\n",
        "version: 1\nbase_url: https://e.org/\nfiles:\n  - ~\n",
        "version: 1\nbase_url: https://e.org/\nfiles: []\n",
        "version: 1\nbase_url: https://e.org/\nfiles:\n",
        "version: 1\nbase_url: https://e.org/\nfiles: {}\n",
        "version: 1\nbase_url: &b https://e.org/\nfiles: *b\n",
        "v: &k files\nversion: 1\n*k : []\n",
        "version: 1\n? [files]\n: []\n",
        // files deeper down is not the entry list.
        "version: 1\nbase_url: https://e.org/\nfiles:\n  - path: a\n\(entry)    files:\n      - x\n",
        // Flow style, and an alias budget spent across entries (the dropped nodes still count).
        "{version: 1, base_url: 'https://e.org/', files: [{path: a, size: 1, sha256: \(sha)}]}\n",
        "version: 1\nbase_url: https://e.org/\nfiles:\n  - path: a\n\(entry)    mode: &a [x, x, x, x, x, x, x, x, x, x]\n"
            + "  - path: b\n\(entry)    mode: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            + "  - path: c\n\(entry)    mode: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
            + "  - path: d\n\(entry)    mode: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
            + "  - path: e\n\(entry)    mode: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
            + "  - path: f\n\(entry)    mode: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
    ]

    static var corpus: [[UInt8]] {
        get throws {
            try FuzzCorpusTests.files("manifest").map { [UInt8](try Data(contentsOf: $0)) }
        }
    }

    static func big(_ count: Int, error at: Int? = nil) -> String {
        var text = "version: 1\nbase_url: https://example.org/media/\nfiles:\n"
        for i in 0..<count {
            text += "  - path: \"d\(i % 7)/f \(i).dat\"\n    size: \(i == at ? "-1" : String(i))\n    sha256: \(sha)\n"
        }
        return text
    }

    /// The manifest (every field) or the error, as one comparable text.
    static func outcome(_ bytes: [UInt8], _ reader: ManifestLoader.Reader) -> String {
        var text = bytes
        do {
            let m = try ManifestLoader.manifest(from: &text, sourceName: "m.yaml", reader: reader)
            return "\(m.sourceName) \(m.version) \(String(describing: m.baseURL)) \(m.mirrors) \(String(describing: m.destination)) \(m.entries)"
        } catch {
            return "error: \(error)"
        }
    }

    static func expectSameOutcome(_ bytes: [UInt8], _ name: String) {
        let tree = outcome(bytes, .init(fastPath: false, streaming: false))
        for (fast, streaming) in [(false, true), (true, false), (true, true)] {
            let other = outcome(bytes, .init(fastPath: fast, streaming: streaming))
            #expect(other == tree, "fastPath \(fast), streaming \(streaming): \(name)")
        }
    }

    @Test func streamedEntriesEqualTheWholeTreesOnTheStreamingCases() {
        for text in Self.streamingCases { Self.expectSameOutcome(Array(text.utf8), text) }
    }

    /// 2000 entries (14,000 nodes, all dropped), then aliases expanding to about 122,000 nodes:
    /// within the budget of 10 per node parsed, beyond its floor of 100,000.
    @Test func theAliasBudgetCountsTheDroppedNodes() {
        var text = Self.big(2000)
        var previous = "[x, x, x, x, x, x, x, x, x, x]"
        for (i, name) in ["a", "b", "c", "d", "e"].enumerated() {
            text += "  - path: z\(i)\n\(Self.entry)    mode: &\(name) \(previous)\n"
            previous = "[" + Array(repeating: "*\(name)", count: 10).joined(separator: ", ") + "]"
        }
        let bytes = Array(text.utf8)
        #expect(Self.outcome(bytes, .init(fastPath: false, streaming: false)).contains("mode must be an octal string"))
        Self.expectSameOutcome(bytes, "alias budget after 2000 entries")
    }

    @Test func streamedEntriesEqualTheWholeTreesOnEveryOtherKnownInput() throws {
        let texts = invalidManifests.map(\.yaml) + FastManifestScannerTests.accepted + FastManifestScannerTests.declined
            + [Self.big(3000), Self.big(3000, error: 2500)]
        for text in texts { Self.expectSameOutcome(Array(text.utf8), String(text.prefix(300))) }
        for bytes in try Self.corpus { Self.expectSameOutcome(bytes, "corpus file of \(bytes.count) bytes") }
    }

    /// Not just equal: the streamed reader really drops the items (the tree keeps only the top level).
    @Test func aStreamedTreeHoldsNoEntryNodes() throws {
        var text = Array(Self.big(1000).utf8)
        let parsed = try ManifestLoader.parseTree(&text, sourceName: "m.yaml", reader: .init(fastPath: false, streaming: true))
        #expect(parsed.tree.nodes.count < 20)
        #expect(parsed.entries?.output.entries.count == 1000)
    }
}
