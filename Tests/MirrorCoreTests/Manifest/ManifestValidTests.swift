@testable import MirrorModel
import Testing
@testable import MirrorCore
@testable import MirrorFS

private typealias F = ManifestFixture
private let sha = ManifestFixture.sha256

@Test func specExampleLoads() throws {
    let m = try F.parse(F.yaml(
        "version: 1",
        "base_url: https://media.example.org/lab/     # entries' relative `url` resolve against this",
        "mirrors:                                      # optional",
        "  - https://mirror2.example.org/lab/",
        "destination: media",
        "files:",
        "  - path: videos/intro.mp4",
        "    size: 734003200",
        "    sha256: 3b1fd0c54c4a\(String(repeating: "0", count: 52))",
        "  - path: \"datasets/run 7/frames.tar\"         # spaces and UTF-8 are fine",
        "    url: https://other.example.org/frames.tar # absolute: used as is",
        "    size: 1048576",
        "    sha256: 9f86d081884c\(String(repeating: "f", count: 52))",
        "    mtime: 2026-11-01T12:00:00Z",
        "    mode: \"0644\""))
    #expect(m.sourceName == "m.yaml")
    #expect(m.version == 1)
    #expect(m.baseURL == "https://media.example.org/lab/")
    #expect(m.mirrors == ["https://mirror2.example.org/lab/"])
    #expect(m.destination == "media")
    #expect(m.entries.count == 2)

    let intro = m.entries[0]
    #expect(intro.path == "videos/intro.mp4")
    #expect(intro.url == .relative("videos/intro.mp4"))
    #expect(intro.size == 734_003_200)
    #expect(intro.digests[.sha256]?.hex == "3b1fd0c54c4a" + String(repeating: "0", count: 52))
    #expect(intro.digests[.sha512] == nil && intro.mtime == nil && intro.mode == nil)
    #expect(intro.line == 7)
    #expect(m.sources(for: intro) == ["https://media.example.org/lab/videos/intro.mp4",
                                      "https://mirror2.example.org/lab/videos/intro.mp4"])

    let frames = m.entries[1]
    #expect(frames.path == "datasets/run 7/frames.tar")
    #expect(frames.url == .absolute("https://other.example.org/frames.tar"))
    #expect(m.sources(for: frames) == ["https://other.example.org/frames.tar"])
    #expect(frames.size == 1_048_576)
    #expect(frames.mtime == FileTime(seconds: 1_793_534_400))
    #expect(frames.mode == 0o644)
    #expect(frames.line == 10)
}

@Test func allOptionalKeys() throws {
    let m = try F.parse(F.yaml(
        "version: 1",
        "base_url: file:///srv/lab/",
        "mirrors: [\"https://user@[::1]:8443/lab/\", http://mirror.example:8080/lab/]",
        "destination: /data/media",
        "files:",
        "  - path: a/b.bin",
        "    url: ../shared/b.bin",
        "    size: 0",
        "    sha256: \(sha.uppercased())",
        "    sha512: \(F.sha512)",
        "    mtime: 2026-11-01T12:00:00.5+02:00",
        "    mode: 0755"))
    #expect(m.destination == "/data/media")
    let e = try #require(m.entries.first)
    #expect(e.digests[.sha256]?.hex == sha)
    #expect(e.digests[.sha512]?.hex == F.sha512)
    #expect(e.size == 0)
    #expect(e.mtime == FileTime(seconds: 1_793_534_400 - 7200, nanoseconds: 500_000_000))
    #expect(e.mode == 0o755)
    #expect(e.url == .relative("../shared/b.bin"))
    #expect(m.sources(for: e) == ["file:///srv/shared/b.bin", "https://user@[::1]:8443/shared/b.bin",
                                  "http://mirror.example:8080/shared/b.bin"])
}

@Test func emptyFileListNeedsNoBaseURL() throws {
    let m = try F.parse(F.yaml("version: 1", "files: []"))
    #expect(m.entries.isEmpty && m.baseURL == nil && m.mirrors.isEmpty && m.destination == nil)
}

@Test func defaultURLIsThePathPercentEncoded() throws {
    let m = try F.parse(F.yaml(
        "version: 1",
        "base_url: https://media.example.org/lab/",
        "files:",
        "  - {path: \"datasets/run 7/frames.tar\", size: 1, sha256: \(sha)}",
        "  - {path: \"données/été 2026/ß.txt\", size: 1, sha256: \(sha)}",
        "  - {path: \"odd/a:b@c+d=e;f&g?h#i%j\", size: 1, sha256: \(sha)}",
        "  - {path: 2024, size: 1, sha256: \(sha)}"))
    #expect(m.entries.map(\.path) == ["datasets/run 7/frames.tar", "données/été 2026/ß.txt",
                                      "odd/a:b@c+d=e;f&g?h#i%j", "2024"])
    #expect(m.entries.map(\.url) == [.relative("datasets/run%207/frames.tar"),
                                     .relative("donn%C3%A9es/%C3%A9t%C3%A9%202026/%C3%9F.txt"),
                                     .relative("odd/a%3Ab%40c%2Bd%3De%3Bf%26g%3Fh%23i%25j"),
                                     .relative("2024")])
    #expect(m.sources(for: m.entries[0]) == ["https://media.example.org/lab/datasets/run%207/frames.tar"])
}

@Test func siblingsAndSimilarNamesDoNotClash() throws {
    let m = try F.parse(F.yaml(
        "version: 1",
        "base_url: https://x.example/",
        "files:",
        "  - {path: a/b, size: 1, sha256: \(sha)}",
        "  - {path: a/c, size: 1, sha256: \(sha)}",
        "  - {path: ab, size: 1, sha256: \(sha)}",
        "  - {path: a/bc/d, size: 1, sha256: \(sha)}",
        "  - {path: .MIRRORED/x, size: 1, sha256: \(sha)}",
        "  - {path: a/.MIRROR/x, size: 1, sha256: \(sha)}",
        "  - {path: .mirrors, size: 1, sha256: \(sha)}",
        "  - {path: .mirrored, size: 4611686018427387897, sha256: \(sha)}"))
    #expect(m.entries.count == 8, "only a first component that folds to .mirror is the state folder")
    // The largest size that keeps the manifest's total at 2^62, the most it may add up to.
    #expect(m.entries.last?.size == (Int64(1) << 62) - 7)
}

@Test func aliasesReuseValues() throws {
    let m = try F.parse(F.yaml(
        "version: 1",
        "base_url: &base https://x.example/lab/",
        "mirrors: [*base]",
        "files:",
        "  - path: a",
        "    size: &n 10",
        "    sha256: &h \(sha)",
        "    mtime: &t 2026-11-01T12:00:00Z",
        "    mode: &m \"0600\"",
        "  - {path: b, size: *n, sha256: *h, mtime: *t, mode: *m}"))
    #expect(m.mirrors == ["https://x.example/lab/"])
    #expect(m.entries.count == 2)
    #expect(m.entries[0].digests[.sha256] == m.entries[1].digests[.sha256])
    #expect(m.entries[1].size == 10 && m.entries[1].mode == 0o600)
    #expect(m.entries[1].mtime == FileTime(seconds: 1_793_534_400))
}

@Test func aliasedWholeEntryIsADuplicatePathAtTheAlias() {
    let e = F.error(F.yaml(
        "version: 1",
        "base_url: https://x.example/",
        "files:",
        "  - &e {path: a, size: 1, sha256: \(sha)}",
        "  - *e"))
    // The path node is the anchored one, but the entry is reached through the alias at 5:5.
    #expect(e?.message.contains("duplicate path \"a\": first listed on line 4") == true, "\(String(describing: e))")
}

@Test func manyAliasesWithinBudgetAreFine() throws {
    var lines = ["version: 1", "base_url: https://x.example/", "files:",
                 "  - {path: f0, size: 1, sha256: &h \(sha), mtime: &t 2026-11-01T12:00:00Z}"]
    for i in 1 ..< 2000 { lines.append("  - {path: f\(i), size: 1, sha256: *h, mtime: *t}") }
    let m = try F.parse(lines.joined(separator: "\n"))
    #expect(m.entries.count == 2000)
}

@Test func duplicateKeysInLargeMappingsAreFound() {
    var lines = ["version: 1", "files: []", "x:"]
    for i in 0 ..< 30 { lines.append("  k\(i): 1") }
    lines.append("  k7: 2")  // line 34
    let e = F.error(lines.joined(separator: "\n"))
    #expect(e?.line == 34 && e?.column == 3, "\(String(describing: e))")
    #expect(e?.message.contains("duplicate key \"k7\" (first on line 11)") == true, "\(String(describing: e))")
}

@Test func explicitDocumentMarkersAndCommentsAreFine() throws {
    let m = try F.parse(F.yaml("%YAML 1.1", "---", "# comment", "version: 1", "files: []", "..."))
    #expect(m.entries.isEmpty)
}

@Test func timestamps() {
    func t(_ s: String) -> FileTime? { try? RFC3339.parse(s).get() }
    #expect(t("1970-01-01T00:00:00Z") == FileTime(seconds: 0))
    #expect(t("1969-12-31T23:59:59Z") == FileTime(seconds: -1))
    #expect(t("1900-03-01T00:00:00Z") == FileTime(seconds: -2_203_891_200))
    #expect(t("2000-02-29T23:59:59Z") == FileTime(seconds: 951_868_799))
    #expect(t("2016-12-31T23:59:60Z") == FileTime(seconds: 1_483_228_800))
    #expect(t("2026-11-01t10:00:00.123456789z") == FileTime(seconds: 1_793_534_400 - 7200, nanoseconds: 123_456_789))
    #expect(t("2026-11-01T07:30:00-04:30") == FileTime(seconds: 1_793_534_400))
    #expect(t("2026-11-01T12:00:00.1Z")?.nanoseconds == 100_000_000)
    #expect(t("2026-11-01 12:00:00Z") == nil)
    #expect(t("2026-11-01T12:00:00.Z") == nil)
    #expect(t("2026-11-01T12:00:00+2:00") == nil)
    #expect(t("2026-11-01T12:00:00+24:00") == nil)
    #expect(t("2026-11-01T12:00:00Zjunk") == nil)
    #expect(t("2026-04-31T12:00:00Z") == nil)
}

@Test func loadReadsFilesAndReportsUnreadableOnes() throws {
    let dir = try ManifestTempDir()
    let path = dir.path + "/manifest.yaml"
    try dir.write(Array(F.yaml("version: 1", "files: []").utf8), to: path)
    let m = try ManifestLoader.load(path: path, displayName: "shown.yaml")
    #expect(m.sourceName == "shown.yaml")

    // Nothing read: `cannotRead`, which exits 66 where an invalid manifest exits 65.
    #expect(throws: ManifestError(file: dir.path + "/missing.yaml",
                                  message: "cannot read manifest: No such file or directory", cannotRead: true)) {
        try ManifestLoader.load(path: dir.path + "/missing.yaml")
    }
    #expect(throws: ManifestError(file: "d", message: "this is a folder, not a manifest file: give the manifest's path (FOLDER/manifest.yaml, say)",
                                  cannotRead: true)) {
        try ManifestLoader.load(path: dir.path, displayName: "d")
    }
}

/// The spec: sha256 is required "unless sha512 is given".
@Test func sha512AloneIsEnough() throws {
    let m = try F.parse(F.yaml("version: 1", "base_url: https://x/", "files:",
                               "  - path: a", "    size: 1", "    sha512: \(F.sha512)"))
    let e = try #require(m.entries.first)
    #expect(e.digests[.sha256] == nil)
    #expect(e.digests[.sha512]?.hex == F.sha512)
}
