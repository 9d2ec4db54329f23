@testable import MirrorModel
import Testing
@testable import MirrorCore

/// The entry key `chunks` (docs/manifest.md, "Chunk indexes"): read by both manifest readers, and
/// checked like the rest of the entry.
struct ChunksKeyTests {
    typealias F = ManifestFixture

    @Test func anEntryNamesItsChunkIndex() throws {
        let text = F.oneEntry("    chunks:", "      path: .mirror-chunks/a", "      size: 234", "      sha256: \(F.sha256)")
        for fast in [true, false] {
            var bytes = Array(text.utf8)
            let manifest = try ManifestLoader.manifest(from: &bytes, sourceName: "m.yaml", reader: .init(fastPath: fast))
            let chunks = try #require(manifest.entries.first?.chunks)
            #expect(chunks.path == ".mirror-chunks/a" && chunks.size == 234 && chunks.sha256.hex == F.sha256)
            #expect(manifest.chunkIndexSources(for: manifest.entries[0]) == ["https://example.org/.mirror-chunks/a"])
        }
        #expect(try F.parse(F.oneEntry()).entries.first?.chunks == nil)
    }

    @Test(arguments: [
        (["    chunks: x"], 7, 13, "chunks must be a mapping"),
        (["    chunks:", "      path: i", "      size: 1"], 8, 7, "chunks needs path, size and sha256"),
        (["    chunks:", "      path: ../i", "      size: 1", "      sha256: \(ManifestFixture.sha256)"], 8, 13, ".."),
        (["    chunks:", "      path: i", "      size: -1", "      sha256: \(ManifestFixture.sha256)"], 9, 13, "size must be"),
        (["    chunks:", "      path: i", "      url: x", "      size: 1", "      sha256: \(ManifestFixture.sha256)"], 9, 7,
         "unknown key \"url\" in chunks"),
        (["    chunks:", "      path: i", "      size: 337", "      sha256: \(ManifestFixture.sha256)"], 8, 7,
         "chunks size 337 is more than the index of a 1-byte file can be (at most 336 bytes)"),
    ])
    func aBrokenChunksKeyIsAnError(extra: [String], line: Int, column: Int, message: String) throws {
        let text = (["version: 1", "base_url: https://example.org/", "files:", "  - path: a", "    size: 1",
                     "    sha256: \(ManifestFixture.sha256)"] + extra).joined(separator: "\n") + "\n"
        let error = try #require(F.error(text), "accepted:\n\(text)")
        #expect(error.line == line && error.column == column, "\(error)")
        #expect(error.message.contains(message), "\(error)")
    }
}
