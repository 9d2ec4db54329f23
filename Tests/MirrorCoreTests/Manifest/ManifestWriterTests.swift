import Foundation
import MirrorModel
import Testing
import MirrorCore
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `mirror manifest create`: deterministic text the loader accepts, every listed file hashed
/// right, links and state skipped.
@Suite struct ManifestWriterTests {
    let dir: TemporaryDirectory
    let root: String
    /// By the path's bytes: Swift's String equality would merge "é" (NFC) and "e\u{301}" (NFD), two
    /// different names on disk.
    var shas: [[UInt8]: String] = [:]

    init() throws {
        dir = try TemporaryDirectory()
        root = dir.path("tree")
        // Names that need quoting or sort differently by bytes than by Unicode-aware comparison.
        let names = ["b.bin", "a/z.bin", "a b/#1: yes.txt", "Zeta", "é.txt", "e\u{301}.txt", "- dash", "\"quoted\"", "empty", "a/.mirror/kept"]
        for (i, name) in names.enumerated() {
            shas[Array(name.utf8)] = try TestData.writeFile(at: root + "/" + name, size: name == "empty" ? 0 : Int64(1 + i * 3001), seed: UInt64(i))
        }
        try TestData.writeFile(at: root + "/.mirror/journal", size: 10, seed: 99)
        #expect(symlink("/etc/hostname", root + "/link") == 0)
        #expect(symlink(root + "/a", root + "/folder-link") == 0)
        try FileManager.default.createDirectory(atPath: root + "/empty-folder", withIntermediateDirectories: true)
    }

    @Test func listsEveryRegularFileSortedByBytesAndTheLoaderAcceptsIt() throws {
        let result = try ManifestWriter.create(directory: root, baseURL: "http://127.0.0.1:8080/pub", threads: 3)
        let expectedOrder = shas.keys.sorted { $0.lexicographicallyPrecedes($1) }
        #expect(expectedOrder.count == 10)
        #expect(result.files.map { Array($0.path.utf8) } == expectedOrder)
        #expect(result.skipped == [ManifestWriter.Skipped(path: "folder-link", reason: "a symbolic link (not followed)"),
                                   ManifestWriter.Skipped(path: "link", reason: "a symbolic link (not followed)")])

        let loaded = try ManifestLoader.parse(Array(result.yaml.utf8), sourceName: "created.yaml")
        #expect(loaded.baseURL == "http://127.0.0.1:8080/pub/")
        #expect(loaded.entries.map { Array($0.path.utf8) } == expectedOrder)
        for entry in loaded.entries {
            #expect(entry.digests[.sha256]?.hex == shas[Array(entry.path.utf8)], "\(entry.path)")
            #expect(entry.size == FileManager.default.sizeOfFile(root + "/" + entry.path), "\(entry.path)")
        }
        // The default URL is the path under base_url, as a web server serving the folder publishes it.
        let spaced = try #require(loaded.entries.first { $0.path == "a b/#1: yes.txt" })
        #expect(loaded.sources(for: spaced) == ["http://127.0.0.1:8080/pub/a%20b/%231%3A%20yes.txt"])
    }

    @Test func theSameTreeGivesTheSameBytes() throws {
        let one = try ManifestWriter.create(directory: root, baseURL: "https://example.org/x/", threads: 1).yaml
        let two = try ManifestWriter.create(directory: root, baseURL: "https://example.org/x/", threads: 4).yaml
        #expect(Hasher.digest(.sha256, of: Array(one.utf8)) == Hasher.digest(.sha256, of: Array(two.utf8)))
        #expect(one.hasPrefix("version: 1\nbase_url: \"https://example.org/x/\"\nfiles:\n  - path: \"\\\"quoted\\\"\"\n    size: "))
        // A changed byte changes the manifest.
        try TestData.writeFile(at: root + "/b.bin", size: 1, seed: 1234)
        let three = try ManifestWriter.create(directory: root, baseURL: "https://example.org/x/").yaml
        #expect(three != one)
    }

    @Test func anEmptyFolderGivesAnEmptyListAndABadBaseURLIsRefused() throws {
        let empty = dir.path("empty")
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let result = try ManifestWriter.create(directory: empty, baseURL: "file:///srv/x/")
        #expect(result.yaml == "version: 1\nbase_url: \"file:///srv/x/\"\nfiles: []\n")
        #expect(try ManifestLoader.parse(Array(result.yaml.utf8), sourceName: "e").entries.isEmpty)
        #expect(throws: ManifestWriterError.self) { try ManifestWriter.create(directory: empty, baseURL: "ftp://example.org/") }
        #expect(throws: ManifestWriterError.self) { try ManifestWriter.create(directory: empty, baseURL: "relative/") }
        #expect(throws: ManifestWriterError.self) { try ManifestWriter.create(directory: dir.path("absent"), baseURL: "http://x/") }
    }

    @Test func namesAManifestCannotHoldAreSkipped() throws {
        let odd = dir.path("odd")
        try TestData.writeFile(at: odd + "/ok.txt", size: 3, seed: 1)
        try TestData.writeFile(at: odd + "/back\\slash", size: 3, seed: 2)
        try TestData.writeFile(at: odd + "/tab\there", size: 3, seed: 3)
        let bad = (Array((odd + "/latin1-").utf8) + [0xE9, 0]).map { CChar(bitPattern: $0) }
        let fd = bad.withUnsafeBufferPointer { buffer in buffer.baseAddress.map { open($0, O_WRONLY | O_CREAT, 0o644) } ?? -1 }
        #expect(fd >= 0)
        close(fd)
        // Characters YAML must escape are fine in a name; the two it cannot carry at all are not.
        try TestData.writeFile(at: odd + "/line\u{2028}sep", size: 3, seed: 4)
        try TestData.writeFile(at: odd + "/bom\u{FEFF}", size: 3, seed: 5)
        try TestData.writeFile(at: odd + "/non\u{FFFE}char", size: 3, seed: 6)
        // `.MIRROR` at the top would be the state folder on a case-insensitive file system; deeper it is a plain name.
        try TestData.writeFile(at: odd + "/.MIRROR/x", size: 3, seed: 7)
        try TestData.writeFile(at: odd + "/sub/.MIRROR/y", size: 3, seed: 8)
        let result = try ManifestWriter.create(directory: odd, baseURL: "http://x/")
        #expect(result.files.map(\.path) == ["bom\u{FEFF}", "line\u{2028}sep", "ok.txt", "sub/.MIRROR/y"])
        #expect(Set(result.skipped.map(\.reason)) == ["the name holds a backslash", "the name holds a control character",
                                                      "the name is not valid UTF-8", "the name holds U+FFFE, which YAML cannot carry",
                                                      "the name would be `.mirror`, mirror's state, on a case-insensitive file system"])
        let loaded = try ManifestLoader.parse(Array(result.yaml.utf8), sourceName: "odd.yaml")
        #expect(loaded.entries.map { Array($0.path.utf8) } == result.files.map { Array($0.path.utf8) })
    }

    @Test func writingAtomicallyReplacesTheFile() throws {
        let out = dir.path("m.yaml")
        try ManifestWriter.writeAtomically("one\n", to: out)
        try ManifestWriter.writeAtomically("two\n", to: out)
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "two\n")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.contains(".tmp-") }
        #expect(leftovers.isEmpty)
    }
}

private extension FileManager {
    func sizeOfFile(_ path: String) -> Int64 {
        ((try? attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? -1
    }
}
