import Foundation
import MirrorModel
import Testing
import MirrorCore
import MirrorTestSupport

/// `mirror manifest create`, the built binary: a round trip create → sync into an empty folder →
/// verify gives the same tree, and the output is the same bytes every time.
@Suite(.serialized) struct ManifestCreateTests {
    func run(_ args: [String]) throws -> ProcessResult {
        try Mirror.run(args, timeout: 120)
    }

    @Test func createSyncVerifyGivesTheSameTree() throws {
        let fx = try SyncFixture()
        var expected: [String: String] = [:]
        let names = ["top.bin", "videos/intro 1.mp4", "données/été.csv", "deep/er/est/x", "empty.txt", "percent%20name", "a#b?c.txt"]
        for (i, name) in names.enumerated() {
            let size: Int64 = name == "empty.txt" ? 0 : (name == "top.bin" ? 5 << 20 : Int64(1 + i * 9973))
            expected[name] = try TestData.writeFile(at: fx.www + "/" + name, size: size, seed: UInt64(i))
        }
        // Neither a link nor mirror's own state belongs in the manifest.
        #expect(symlink(fx.www + "/top.bin", fx.www + "/link.bin") == 0)
        try TestData.writeFile(at: fx.www + "/.mirror/journal", size: 10, seed: 77)

        let created = try run(["manifest", "create", fx.www, "--base-url", fx.server.baseURL, "-o", fx.manifestPath])
        #expect(created.exitCode == 0, "\(created)")
        #expect(created.stdout.isEmpty)
        #expect(created.stderr.contains("skipped link.bin: a symbolic link (not followed)"), "\(created.stderr)")

        // The loader reads back exactly the tree.
        let manifest = try ManifestLoader.load(path: fx.manifestPath)
        #expect(Set(manifest.entries.map(\.path)) == Set(expected.keys))
        #expect(manifest.entries.map { Array($0.path.utf8) } == manifest.entries.map { Array($0.path.utf8) }.sorted { $0.lexicographicallyPrecedes($1) })

        // Same tree, same bytes: stdout and a second -o run match the first file.
        let first = try TestData.sha256(ofFileAt: fx.manifestPath)
        let again = try run(["manifest", "create", fx.www, "--base-url", fx.server.baseURL])
        #expect(again.exitCode == 0)
        #expect(TestData.sha256(of: Array(again.stdout.utf8)) == first)
        let second = fx.dir.path("second.yaml")
        #expect(try run(["manifest", "create", fx.www, "--base-url", fx.server.baseURL, "-o", second, "--jobs", "1"]).exitCode == 0)
        #expect(try TestData.sha256(ofFileAt: second) == first)

        let sync = try fx.sync()
        #expect(sync.exitCode == 0, "\(sync)")
        let verify = try run(["verify", fx.manifestPath, "--dest", fx.dest])
        #expect(verify.exitCode == 0, "\(verify)")
        for (path, sha) in expected {
            #expect(try TestData.sha256(ofFileAt: fx.destPath(path)) == sha, "\(path)")
        }
        #expect(try tree(fx.dest) == Set(expected.keys))
    }

    /// A manifest written into the folder it describes does not list itself on the next run.
    @Test func theOutputFileInsideTheFolderIsNotListed() throws {
        let dir = try TemporaryDirectory()
        try TestData.writeFile(at: dir.path("a.bin"), size: 10, seed: 1)
        let out = dir.path("manifest.yaml")
        for _ in 0..<2 {
            let r = try run(["manifest", "create", dir.path, "--base-url", "https://example.org/a/", "-o", out])
            #expect(r.exitCode == 0, "\(r)")
        }
        let manifest = try ManifestLoader.load(path: out)
        #expect(manifest.entries.map(\.path) == ["a.bin"])
    }

    /// Create, sign, then both again in place. The second manifest must not
    /// list the first or its signature (which re-signing changes: every client's sync failed on
    /// `manifest.yaml.sig: checksum mismatch`); `--exclude` leaves out dotfiles and patterns.
    @Test func republishingInPlaceListsNeitherTheManifestNorItsSignature() throws {
        let dir = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.path("www/sub"), withIntermediateDirectories: true)
        try TestData.writeFile(at: dir.path("www/a.bin"), size: 10, seed: 1)
        try TestData.writeFile(at: dir.path("www/.DS_Store"), size: 10, seed: 2)
        try TestData.writeFile(at: dir.path("www/sub/.DS_Store"), size: 10, seed: 3)
        try TestData.writeFile(at: dir.path("www/sub/b.tmp"), size: 10, seed: 4)
        try TestData.writeFile(at: dir.path("www/sub/c.bin"), size: 10, seed: 5)
        let out = dir.path("www/manifest.yaml")
        let keys = try TestKeys()
        let key = try keys.generateEd25519("publisher").privateKey
        for round in 0..<2 {
            let created = try run(["manifest", "create", dir.path("www"), "--base-url", "https://example.org/a/", "-o", out,
                                   "--exclude", ".DS_Store", "--exclude", "sub/*.tmp"])
            #expect(created.exitCode == 0, "round \(round): \(created)")
            let signed = try run(["manifest", "sign", out, "--key", key])
            #expect(signed.exitCode == 0, "round \(round): \(signed)")
        }
        let manifest = try ManifestLoader.load(path: out)
        #expect(manifest.entries.map(\.path) == ["a.bin", "sub/c.bin"])
    }

    @Test func aBadBaseURLIsAUsageError() throws {
        let dir = try TemporaryDirectory()
        let r = try run(["manifest", "create", dir.path, "--base-url", "ftp://example.org/"])
        #expect(r.exitCode == 64, "\(r)")
        #expect(r.stderr.contains("ftp"), "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        let missing = try run(["manifest", "create", dir.path])
        #expect(missing.exitCode == 64, "\(missing)")
    }

    private func tree(_ root: String) throws -> Set<String> {
        var out: Set<String> = []
        guard let walker = FileManager.default.enumerator(atPath: root) else { return out }
        while let item = walker.nextObject() as? String {
            if item == ".mirror" { walker.skipDescendants(); continue }
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + item, isDirectory: &isDir), !isDir.boolValue { out.insert(item) }
        }
        return out
    }
}
