import Foundation
@testable import MirrorModel
import Testing

/// Metalink files written by others, read by ``Metalink/parse(_:sourceName:)``: the inputs of
/// aria2's and libmetalink's test suites and libmetalink's MirrorBrain example, copied unchanged
/// into `Tests/Fixtures/metalink/` (each folder's `SOURCE.md` names the upstream commit and paths).
/// The MirrorBrain file loads and its values are checked one by one; every other file is refused,
/// and the refusal is checked to name the first thing in it that mirror does not take.
@Suite struct MetalinkFixtureTests {
    static let folder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/metalink")

    static let libreOffice = "libmetalink/LibO_3.5.4_Win_x86_install_multi.msi.meta4"

    static func bytes(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: folder.appendingPathComponent(name)))
    }

    /// A file refused: the line of the element the refusal names, and words of its message.
    struct Refusal: Sendable, CustomTestStringConvertible {
        let fixture: String
        let line: Int
        let words: String
        var testDescription: String { fixture }
    }

    static let metalink3 = "this is a Metalink 3 file (http://www.metalinker.org/); mirror reads Metalink 4"
    static let noStrongHash = #"has no <hash type="sha-256"> or "sha-512"; mirror checks every byte against one"#

    static let refusals: [Refusal] = [
        // `t/README` has a <url> and a <metaurl> with a relative URL, but no <size>.
        Refusal(fixture: "aria2/local-metaurl.meta4", line: 3, words: #"file "t/README" has no <size>"#),
        // Two files, each only a <url>: the first has no <size>.
        Refusal(fixture: "aria2/serialize_session.meta4", line: 3, words: #"file "t/README" has no <size>"#),
        // A relative <url> (aria2 resolves it against the document's URI); no <size> comes first.
        Refusal(fixture: "aria2/base_uri.xml", line: 3, words: #"file "example.ext" has no <size>"#),
        // RFC 5854's own example: md5 and sha-1 whole-file hashes, and sha-1 and sha-256 <pieces>;
        // piece hashes are not a whole-file digest, so no hash mirror can check the file against.
        Refusal(fixture: "aria2/metalink4.xml", line: 4, words: #"file "example.ext" "# + noStrongHash),
        // Sizes and http URLs, no hash at all.
        Refusal(fixture: "aria2/metalink4-groupbymetaurl.xml", line: 3, words: #"file "file1" "# + noStrongHash),
        // `..\..\example.ext`: a Windows path out of the destination; refused for its backslash.
        Refusal(fixture: "aria2/metalink4-dosdirtraversal.xml", line: 3,
                words: #"path "..\\..\\example.ext" contains a backslash; separate folders with "/""#),
        // libmetalink's broken-on-purpose Metalink 4 file (a <file> with no name, `../unsafe`, a size
        // of "abc", a priority of -100 come later): its first file's second <hash> has no type.
        Refusal(fixture: "libmetalink/test2.xml", line: 14, words: "<hash> has no type attribute"),
        // Metalink 3 documents, refused by their namespace.
        Refusal(fixture: "aria2/metalink3-dirtraversal.xml", line: 2, words: metalink3),
        Refusal(fixture: "aria2/2files.metalink", line: 2, words: metalink3),
        Refusal(fixture: "aria2/test.xml", line: 2, words: metalink3),
        // Its <metalink> start tag runs from line 2 to line 4; libxml2 numbers an element by the
        // line its start tag ends on.
        Refusal(fixture: "libmetalink/test1.xml", line: 4, words: metalink3),
    ]

    @Test(arguments: refusals)
    func upstreamFileIsRefused(_ expected: Refusal) throws {
        let bytes = try Self.bytes(expected.fixture)
        #expect(Metalink.looksLike(bytes))
        let error = #expect(throws: ManifestError.self) { try Metalink.parse(bytes, sourceName: expected.fixture) }
        #expect(error?.file == expected.fixture)
        #expect(error?.line == expected.line, "\(String(describing: error))")
        #expect(error?.message.contains(expected.words) == true, "\(String(describing: error))")
        // The manifest loader tells it for a Metalink by its bytes and refuses it the same way.
        let loaded = #expect(throws: ManifestError.self) { try ManifestLoader.parse(bytes, sourceName: expected.fixture) }
        #expect(loaded == error)
    }

    /// MirrorBrain's answer for a LibreOffice installer: one file, its size and sha-256, 808 sha-1
    /// piece hashes of 256 KiB, and 76 mirrors (75 http, one https), priorities 1 to 76.
    @Test func mirrorBrainLibreOfficeFileLoads() throws {
        let bytes = try Self.bytes(Self.libreOffice)
        #expect(Metalink.looksLike(bytes))
        let link = try Metalink.parse(bytes, sourceName: Self.libreOffice)
        #expect(link.files.count == 1)
        let file = try #require(link.files.first)
        #expect(file.path == "LibO_3.5.4_Win_x86_install_multi.msi")
        #expect(file.line == 11)
        #expect(file.size == 211_689_472)
        #expect(file.digests[.sha256]?.hex == "46e375b98e8877bf1202dfcdef64b883a91de6ece0a4510f9b828ea1d1747656")
        #expect(file.digests[.sha512] == nil)

        let pieces = try #require(file.pieces)
        #expect(pieces.length == 262_144)
        #expect(pieces.type == "sha-1")
        // 807 whole pieces of 262144 bytes and a last one of 139264.
        #expect(pieces.hashes.count == 808)
        #expect(pieces.hashes.first == "707461f07f884b42dc51f7ce3f854e0df50cb5a0")
        #expect(pieces.hashes.last == "98a2ea35080aeb0d369ab45fa34be7bf5bcd58a6")

        let tail = "/libreoffice/stable/3.5.4/win/x86/LibO_3.5.4_Win_x86_install_multi.msi"
        #expect(file.urls.count == 76)
        #expect(Array(file.urls.prefix(3)) == [
            "http://mirror3.layerjet.com/tdf" + tail,
            "http://mirror.netcologne.de/tdf" + tail,
            "http://mirror.derwebwolf.net/tdf" + tail,
        ])
        #expect(file.urls[18] == "https://stuwww.uvt.nl/tdf" + tail)
        #expect(file.urls.last == "http://mirror.aarnet.edu.au/pub/tdf" + tail)
        #expect(file.urls.allSatisfy { $0.hasSuffix(tail) })
        #expect(file.urls.filter { $0.hasPrefix("https://") }.count == 1)
        #expect(file.urls.filter { $0.hasPrefix("http://") }.count == 75)
        // The publisher's <url> (http://www.documentfoundation.org/) is not a mirror of the file.
        #expect(!file.urls.contains("http://www.documentfoundation.org/"))

        let manifest = try ManifestLoader.parse(bytes, sourceName: Self.libreOffice)
        #expect(manifest.entries.count == 1)
        let entry = try #require(manifest.entries.first)
        #expect(entry.path == file.path)
        #expect(entry.size == file.size)
        #expect(entry.digests == file.digests)
        #expect(manifest.sources(for: entry) == file.urls)
    }

    /// Every file in the fixture folders is one of the cases above, so a file added there without
    /// a test, or one gone, is noticed.
    @Test func everyFixtureHasATest() throws {
        var found: [String] = []
        for upstream in ["aria2", "libmetalink"] {
            let names = try FileManager.default.contentsOfDirectory(atPath: Self.folder.appendingPathComponent(upstream).path)
            #expect(names.contains("COPYING") && names.contains("SOURCE.md"), "\(upstream)")
            found += names.filter { $0 != "COPYING" && $0 != "SOURCE.md" }.map { "\(upstream)/\($0)" }
        }
        let tested = Self.refusals.map(\.fixture) + [Self.libreOffice]
        #expect(found.sorted() == tested.sorted())
    }
}
