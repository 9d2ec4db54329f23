@testable import MirrorModel
import Testing
@testable import MirrorCore

/// Entry paths are bytes in the manifest's shared blocks (``ManifestPath``, ``ByteArena``):
/// compared and hashed by bytes, never canonically, the same whether made by the reader or alone,
/// and an entry without `url` still resolves to its percent-encoded path.
struct ManifestPathTests {
    @Test func pathsAreComparedAsBytes() {
        let nfc = "caf\u{E9}.mp4", nfd = "cafe\u{301}.mp4"
        let stringsEqual = nfc == nfd
        #expect(stringsEqual)  // Swift's String says equal: exactly what a path must not do
        #expect(ManifestPath(nfc) != ManifestPath(nfd))
        #expect(Set([ManifestPath(nfc), ManifestPath(nfd)]).count == 2)
        // Two entries for the two files are two entries (they compared equal as `String` paths).
        let digests = DigestSet(.sha256, Digest(bytes: [UInt8](repeating: 7, count: 32)))
        let a = ManifestEntry(path: nfc, url: .relative("x"), size: 1, digests: digests)
        let b = ManifestEntry(path: nfd, url: .relative("x"), size: 1, digests: digests)
        #expect(a != b)
        // Byte order: "Z" (0x5A) before "a" (0x61) before "é" (0xC3 0xA9).
        let sorted = ["é", "a", "Z", "ab", ""].map(ManifestPath.init).sorted().map(\.string)
        #expect(sorted == ["", "Z", "a", "ab", "é"])
    }

    @Test func theArenaGivesTheSamePathsAsAlone() {
        let arena = ByteArena()
        let long = String(repeating: "d/", count: 40_000) + "f"  // 80,001 bytes: a block of its own
        // 3 × 80 KB and 3000 short ones: blocks of their own and several shared blocks of 64 KiB.
        var texts = [long, long, long]
        for i in 0 ..< 3000 { texts.append(["a", "datasets/project-000/session-a/frame-\(i).bin", "", "caf\u{E9}", "b/c"][i % 5]) }
        let made = texts.map { arena.path($0) }
        for (path, text) in zip(made, texts) {
            #expect(path == ManifestPath(text))
            #expect(path.hashValue == ManifestPath(text).hashValue)
            #expect(path.string.utf8.elementsEqual(text.utf8))
            #expect(path.byteCount == text.utf8.count)
        }
    }

    @Test func anEntryWithoutURLResolvesToItsEncodedPath() throws {
        let text = """
        version: 1
        base_url: https://h.example/set/
        files:
          - path: a b/c%d.bin
            size: 1
            sha256: \(String(repeating: "ab", count: 32))
          - path: x.bin
            url: other/x.bin
            size: 1
            sha256: \(String(repeating: "cd", count: 32))
        """
        let manifest = try ManifestLoader.parse(Array(text.utf8), sourceName: "m.yaml")
        let derived = manifest.entries[0], written = manifest.entries[1]
        #expect(derived.explicitURL == nil)
        #expect(derived.url == .relative("a%20b/c%25d.bin"))
        #expect(manifest.sources(for: derived) == ["https://h.example/set/a%20b/c%25d.bin"])
        #expect(written.explicitURL == .relative("other/x.bin"))
        // Equal to the same entry made with its url spelled out.
        let spelled = ManifestEntry(path: "a b/c%d.bin", url: .relative("a%20b/c%25d.bin"), size: 1,
                                    digests: derived.digests, line: derived.line)
        #expect(spelled == derived)
    }
}
