@testable import MirrorModel
import Testing
@testable import MirrorCore

private typealias F = ManifestFixture

private let sample = F.yaml(
    "version: 1",
    "base_url: https://x.example/",
    "files:",
    "  - {path: a, size: 1, sha256: \(F.sha256)}")

@Test func gzipManifestIsRecognisedByContentNotName() throws {
    let dir = try ManifestTempDir()
    let path = dir.path + "/manifest.yaml"   // no ".gz": the name must not matter
    try dir.writeGzip(Array(sample.utf8), to: path)
    let compressed = try dir.read(path)
    #expect(compressed.starts(with: [0x1f, 0x8b]))

    let loaded = try ManifestLoader.load(path: path)
    #expect(loaded.entries.map(\.path) == ["a"])
    let parsed = try ManifestLoader.parse(compressed, sourceName: "x")
    #expect(parsed.entries == loaded.entries)
}

@Test func gzipErrorsInsideTheYAMLStillHavePositions() throws {
    let dir = try ManifestTempDir()
    let path = dir.path + "/m.gz"
    try dir.writeGzip(Array(F.yaml("version: 3", "files: []").utf8), to: path)
    #expect(throws: ManifestError(file: "m.gz", line: 1, column: 10,
                                  message: "unsupported manifest version 3: this mirror reads version 1")) {
        try ManifestLoader.load(path: path, displayName: "m.gz")
    }
}

@Test func concatenatedGzipMembersAreOneManifest() throws {
    let dir = try ManifestTempDir()
    let bytes = Array(sample.utf8)
    try dir.writeGzip(Array(bytes[..<20]), to: dir.path + "/1")
    try dir.writeGzip(Array(bytes[20...]), to: dir.path + "/2")
    let joined = try dir.read(dir.path + "/1") + dir.read(dir.path + "/2")
    #expect(try ManifestLoader.parse(joined, sourceName: "m").entries.count == 1)
}

@Test func corruptGzipIsRejectedWithoutPosition() throws {
    let dir = try ManifestTempDir()
    try dir.writeGzip(Array(sample.utf8), to: dir.path + "/m")
    let good = try dir.read(dir.path + "/m")

    let garbage = F.error(bytes: [0x1f, 0x8b, 0x08, 0x00, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x03, 0xff, 0xff, 0xff])
    #expect(garbage?.line == nil && garbage?.message.hasPrefix("not a valid gzip file: ") == true,
            "\(String(describing: garbage))")

    let truncated = F.error(bytes: Array(good.dropLast(12)))
    #expect(truncated?.message == "not a valid gzip file: it is truncated (the compressed data ends early)",
            "\(String(describing: truncated))")

    var badCRC = good
    badCRC[badCRC.count - 6] ^= 0xff
    let crc = F.error(bytes: badCRC)
    #expect(crc?.message == "not a valid gzip file: incorrect data check", "\(String(describing: crc))")

    let trailing = F.error(bytes: good + [0x41, 0x42])
    #expect(trailing?.message.contains("unexpected data after the compressed stream") == true,
            "\(String(describing: trailing))")
}

@Test func gzipBombIsRefused() throws {
    let dir = try ManifestTempDir()
    try dir.writeGzip([UInt8](repeating: 0x20, count: 5_000_000), to: dir.path + "/bomb")
    let bomb = try dir.read(dir.path + "/bomb")
    #expect(bomb.count < 20_000)
    #expect(throws: Gzip.Failure(message: "decompressed manifest exceeds 1 MiB (gzip bomb?)")) {
        try Gzip.decompress(bomb, limit: 1 << 20)
    }
    #expect(try Gzip.decompress(bomb, limit: 5_000_000).count == 5_000_000)
}
