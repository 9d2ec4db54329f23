@testable import MirrorModel
import Testing

/// Metalink 4 (RFC 5854) read with libxml2: what mirror takes from it, and the documents it
/// refuses before they cost anything (entities, DTDs, Metalink 3, oversize files).
@Suite struct MetalinkTests {
    static let sha = String(repeating: "ab", count: 32)

    static func document(_ files: String) -> String {
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">\n\(files)</metalink>\n"
    }

    static func file(name: String = "iso/image.iso", size: String = "<size>300</size>", hash: String? = nil,
                     urls: String = "<url priority=\"2\">http://b.example/iso/image.iso</url><url priority=\"1\">https://a.example/image.iso</url>",
                     extra: String = "") -> String {
        "  <file name=\"\(name)\">\(size)<hash type=\"sha-256\">\(hash ?? sha)</hash>\(urls)\(extra)</file>\n"
    }

    func parse(_ text: String) throws -> Metalink {
        try Metalink.parse(Array(text.utf8), sourceName: "set.meta4")
    }

    func refusal(_ text: String) -> String? {
        do { _ = try parse(text); return nil } catch let error as ManifestError { return error.description } catch { return "\(error)" }
    }

    @Test func filesSizesHashesAndURLsByPriority() throws {
        let link = try parse(Self.document(Self.file(extra: "<url>ftp://c.example/x</url><url>http://d.example/last</url><hash type=\"md5\">00</hash>")))
        let file = try #require(link.files.first)
        #expect(file.path == "iso/image.iso")
        #expect(file.size == 300)
        #expect(file.digests[.sha256]?.hex == Self.sha)
        #expect(file.urls == ["https://a.example/image.iso", "http://b.example/iso/image.iso", "http://d.example/last"])
        let manifest = link.manifest(sourceName: "set.meta4")
        #expect(manifest.sources(for: manifest.entries[0]) == file.urls)
    }

    @Test func piecesAreCheckedForForm() throws {
        let h = String(repeating: "0a", count: 20)
        let three = "<pieces length=\"100\" type=\"sha-1\"><hash>\(h)</hash><hash>\(h)</hash><hash>\(h)</hash></pieces>"
        let link = try parse(Self.document(Self.file(extra: three)))
        #expect(link.files[0].pieces?.hashes.count == 3)
        let pieces = try #require(link.manifest(sourceName: "set.meta4").entries[0].pieces)
        #expect(pieces.kind == .sha1 && pieces.length == 100 && pieces.hashes.count == 3 && pieces.hashes[0] == [UInt8](repeating: 0x0a, count: 20))
        #expect(pieces.range(of: 2, size: 300) == 200..<300)
        let two = "<pieces length=\"100\" type=\"sha-1\"><hash>\(h)</hash><hash>\(h)</hash></pieces>"
        #expect(refusal(Self.document(Self.file(extra: two)))?.contains("needs 3") == true)
        // A known type's digests must have its length; an unknown type is kept as read, unused.
        let short = "<pieces length=\"100\" type=\"sha-256\"><hash>\(h)</hash><hash>\(h)</hash><hash>\(h)</hash></pieces>"
        #expect(refusal(Self.document(Self.file(extra: short)))?.contains("piece hash 1 of type sha-256 must be 64 hex digits") == true)
        let tiger = "<pieces length=\"100\" type=\"tiger\"><hash>a</hash><hash>b</hash><hash>c</hash></pieces>"
        let unknown = try parse(Self.document(Self.file(extra: tiger)))
        #expect(unknown.files[0].pieces?.hashes.count == 3)
        #expect(unknown.manifest(sourceName: "set.meta4").entries[0].pieces == nil)
    }

    @Test func extensionElementsAreSkipped() throws {
        let link = try parse(Self.document(Self.file(extra: "<x:note xmlns:x=\"urn:example\"><x:size>9</x:size></x:note>")))
        #expect(link.files[0].size == 300)
    }

    @Test(arguments: [
        (file(name: "../escape"), "\"..\""),
        (file(name: "/etc/passwd"), "absolute"),
        (file() + file(), "listed twice"),
        (file(size: ""), "no <size>"),
        (file(size: "<size>-1</size>"), "<size> must be"),
        (file(hash: "abc"), "64 hex digits"),
        (file(urls: "<url>ftp://only.example/x</url>"), "no http, https or file <url>"),
        ("", "lists no <file>"),
    ])
    func badFilesAreRefused(files: String, words: String) {
        let message = refusal(Self.document(files))
        #expect(message?.contains(words) == true, "\(String(describing: message))")
    }

    @Test func billionLaughsIsRefusedAtItsDoctype() {
        var lol = "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n <!ENTITY lol \"lol\">\n"
        for level in 1 ... 9 {
            lol += " <!ENTITY lol\(level) \"" + String(repeating: "&lol\(level == 1 ? "" : String(level - 1));", count: 10) + "\">\n"
        }
        lol += "]>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"&lol9;\"/></metalink>\n"
        let message = refusal(lol)
        #expect(message?.contains("document type declaration") == true, "\(String(describing: message))")
    }

    @Test func externalEntitiesAreNeverRead() {
        let xxe = "<?xml version=\"1.0\"?>\n<!DOCTYPE m [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">&x;</metalink>"
        #expect(refusal(xxe)?.contains("document type declaration") == true)
    }

    @Test func otherDocumentsAreNamed() {
        #expect(refusal("<?xml version=\"1.0\"?><metalink xmlns=\"http://www.metalinker.org/\" version=\"3.0\"/>")?.contains("Metalink 3") == true)
        #expect(refusal("<?xml version=\"1.0\"?><html/>")?.contains("not a Metalink 4 file") == true)
        #expect(refusal("<?xml version=\"1.0\"?><metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file")?.contains("well-formed") == true)
    }

    @Test func anOversizeFileIsRefusedBeforeItIsParsed() {
        let big = [UInt8](repeating: 0x20, count: Metalink.sizeLimit + 1)
        #expect(throws: ManifestError.self) { try Metalink.parse(big, sourceName: "big.meta4") }
    }

    @Test func theLoaderTakesAMetalinkAsAManifest() throws {
        let manifest = try ManifestLoader.parse(Array(Self.document(Self.file()).utf8), sourceName: "set.meta4")
        #expect(manifest.entries.map(\.path) == ["iso/image.iso"])
    }
}
