@testable import MirrorModel
import Testing
@testable import MirrorCore
@testable import MirrorFS

/// ``ManifestEntry`` keeps `mtime`, `mode` and `line` packed: every value the manifest allows
/// comes back as it went in, absence included, and an entry takes 88 bytes (10^6 entries are
/// held at once; docs/performance.md, "10^6 entries").
struct ManifestEntryLayoutTests {
    static let digests = DigestSet(.sha256, Digest(bytes: [UInt8](repeating: 1, count: 32)))

    @Test func packedFieldsRoundTrip() {
        let times: [FileTime?] = [nil, FileTime(seconds: 0), FileTime(seconds: -1, nanoseconds: 999_999_999),
                                  FileTime(seconds: Int64.max, nanoseconds: 0), FileTime(seconds: 1_800_000_000, nanoseconds: 1)]
        let modes: [UInt32?] = [nil, 0, 0o644, 0o777]
        let lines = [0, 1, 4, Int(Int32.max)]
        for time in times {
            for mode in modes {
                for line in lines {
                    let entry = ManifestEntry(path: "a", url: .relative("a"), size: 1, digests: Self.digests,
                                              mtime: time, mode: mode, line: line)
                    #expect(entry.mtime == time && entry.mode == mode && entry.line == line, "\(String(describing: time)) \(String(describing: mode)) \(line)")
                    var changed = entry
                    changed.mtime = nil
                    changed.mode = nil
                    #expect(changed.mtime == nil && changed.mode == nil && changed.line == line)
                    #expect((changed == entry) == (time == nil && mode == nil))
                }
            }
        }
    }

    @Test func anEntryTakes88Bytes() {
        #expect(MemoryLayout<ManifestEntry>.stride <= 88, "\(MemoryLayout<ManifestEntry>.stride) bytes")
    }

    /// A `url` and a chunk index, which few entries have, live apart: each setter keeps the other
    /// field, and a copy of an entry is not changed by a setter on the original.
    @Test func aURLAndAChunkIndexSurviveEachOthersSetters() throws {
        let chunks = ChunkIndexReference(path: ".chunks/a", size: 10, sha256: try #require(Self.digests[.sha256]))
        var entry = ManifestEntry(path: "a b", url: .absolute("https://example.org/x"), size: 1, digests: Self.digests, chunks: chunks)
        let copy = entry
        entry.chunks = nil
        #expect(entry.explicitURL == .absolute("https://example.org/x") && entry.chunks == nil)
        #expect(copy.chunks == chunks)
        entry.url = .relative("y")
        entry.chunks = chunks
        #expect(entry.explicitURL == .relative("y") && entry.chunks == chunks)
        #expect(copy.explicitURL == .absolute("https://example.org/x"))
        var plain = ManifestEntry(pathBytes: ManifestPath("a b"), url: nil, size: 1, digests: Self.digests)
        #expect(plain.explicitURL == nil && plain.url == .relative("a%20b") && plain.chunks == nil)
        plain.chunks = chunks
        plain.chunks = nil
        #expect(plain.explicitURL == nil && plain.url == .relative("a%20b"))
    }
}
