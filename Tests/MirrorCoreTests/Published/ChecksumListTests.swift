@testable import MirrorModel
import Testing

/// `SHA256SUMS` and `SHA512SUMS` as coreutils writes them, and every line mirror must refuse
/// rather than half understand (docs/manifest.md, "Checksum lists").
@Suite struct ChecksumListTests {
    static let a = String(repeating: "ab", count: 32)
    static let b = String(repeating: "cd", count: 32)
    static let long = String(repeating: "ef", count: 64)

    func parse(_ text: String) throws -> ChecksumList {
        try ChecksumList.parse(Array(text.utf8), sourceName: "SHA256SUMS")
    }

    func refusal(_ text: String) -> ManifestError? {
        do { _ = try parse(text); return nil } catch let error as ManifestError { return error } catch { return nil }
    }

    @Test func textBinaryAndTagLinesAreRead() throws {
        let list = try parse("\(Self.a) *ubuntu-24.04-desktop-amd64.iso\n\(Self.b)  ./sub/dir/file name.img\r\nSHA256 (odd (name).txt) = \(Self.a)\n\n")
        #expect(list.algorithm == .sha256)
        #expect(list.files.map(\.path) == ["ubuntu-24.04-desktop-amd64.iso", "sub/dir/file name.img", "odd (name).txt"])
        #expect(list.files.map(\.line) == [1, 2, 3])
        #expect(list.files[0].digest.hex == Self.a)
    }

    @Test func sha512ListsAreTold() throws {
        #expect(try parse("\(Self.long)  big.iso\n").algorithm == .sha512)
    }

    @Test func fedoraSizeCommentsGiveSizes() throws {
        let list = try parse("# Fedora.iso: 2147483648 bytes\nSHA256 (Fedora.iso) = \(Self.a)\n\(Self.b)  other\n")
        #expect(list.files.map(\.size) == [2_147_483_648, nil])
    }

    @Test func escapedNamesAreUnescapedThenChecked() throws {
        #expect(refusal("\\\(Self.a)  a\\nb\n")?.message.contains("control character") == true)
        #expect(refusal("\\\(Self.a)  a\\\\b\n")?.message.contains("backslash") == true)
        #expect(refusal("\\\(Self.a)  a\\tb\n")?.message.contains("escaped") == true)
    }

    @Test(arguments: [
        ("\(a)  ../etc/passwd\n", "\"..\""),
        ("\(a)  /etc/passwd\n", "absolute"),
        ("\(a)  x\n\(b)  x\n", "listed twice"),
        ("\(a.dropLast(2))  x\n", "62 hex digits"),
        ("\(a)  x\n\(long)  y\n", "a list holds one kind"),
        ("SHA512 (x) = \(a)\n", "not SHA-512"),
        ("\(a)  x\nnot a checksum line\n", "not a checksum line"),
        ("\(a)  .mirror/journal\n", ".mirror"),
        ("# only a comment\n", "names no file"),
    ])
    func badLinesAreRefusedWithTheirLine(text: String, words: String) {
        let error = refusal(text)
        #expect(error?.message.contains(words) == true, "\(String(describing: error))")
        if text.hasPrefix("#") { return }
        #expect(error?.line != nil)
    }

    @Test func theLineOfAnErrorIsTheListsLine() {
        #expect(refusal("\(Self.a)  x\n\n\(Self.b)  ../y\n")?.line == 3)
    }

    @Test func listsAreToldFromManifestsAndMetalinks() {
        #expect(ChecksumList.looksLike(Array("\(Self.a)  x\n".utf8)))
        #expect(ChecksumList.looksLike(Array("# comment\nSHA256 (x) = \(Self.a)\n".utf8)))
        #expect(ChecksumList.looksLike(Array("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n\(Self.a)  x\n".utf8)))
        #expect(!ChecksumList.looksLike(Array("version: 1\nfiles: []\n".utf8)))
        #expect(!ChecksumList.looksLike(Array("<?xml version=\"1.0\"?><metalink/>".utf8)))
    }

    @Test func clearSignedTextIsTheSignedPart() throws {
        let text = "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n\(Self.a)  x\n- -dash.txt\n-----BEGIN PGP SIGNATURE-----\n\nabc\n-----END PGP SIGNATURE-----\n"
        let body = try #require(ClearSigned.text(of: Array(text.utf8)))
        #expect(String(decoding: body, as: UTF8.self) == "\(Self.a)  x\n-dash.txt")
        #expect(ClearSigned.text(of: Array("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nno end\n".utf8)) == nil)
    }
}
