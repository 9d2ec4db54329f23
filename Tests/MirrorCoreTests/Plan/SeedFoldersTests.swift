#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import MirrorCore
@testable import MirrorFS
@testable import MirrorModel
import MirrorTestSupport

/// ``SeedBudget`` (which seed files are hashed for an entry, in which order) and ``SeedFolders``
/// on real folders: no link followed, names as bytes, at most the budget hashed per entry.
@Suite struct SeedFoldersTests {
    static let size: Int64 = 4096

    /// A seed folder with `decoys` files of ``size`` named `d00.bin`... (other bytes).
    static func seed(in dir: TemporaryDirectory, decoys: Int) throws -> String {
        let seed = dir.path("seed")
        try FileManager.default.createDirectory(atPath: seed, withIntermediateDirectories: true)
        for i in 0 ..< decoys { try TestData.writeFile(at: seed + String(format: "/d%02d.bin", i), size: size, seed: UInt64(100 + i)) }
        return seed
    }

    @Test func theBudgetIsEightHashesPerEntry() {
        #expect(SeedBudget.standard.hashesPerEntry == 8)
        #expect(SeedBudget.standard.allowsHash(after: 7))
        #expect(!SeedBudget.standard.allowsHash(after: 8))
    }

    /// The entry's own path, then its file name anywhere, then the rest; each group by path bytes.
    @Test func candidatesAreTriedByPathThenNameThenPath() {
        let paths = ["z.bin", "b/a.bin", "set/a.bin", "a.bin.old", "c/a.bin", "0.bin"].map { Array($0.utf8) }
        let order = SeedBudget.order(paths, for: Array("set/a.bin".utf8)).map { String(decoding: paths[$0], as: UTF8.self) }
        #expect(order == ["set/a.bin", "b/a.bin", "c/a.bin", "0.bin", "a.bin.old", "z.bin"])
        #expect(SeedBudget.rank(of: Array("a.bin".utf8), for: Array("a.bin".utf8)) == 0)
        #expect(SeedBudget.rank(of: Array("x/a.bin".utf8), for: Array("a.bin".utf8)) == 1)
        #expect(SeedBudget.rank(of: Array("xa.bin".utf8), for: Array("a.bin".utf8)) == 2)
    }

    /// Twenty files of the entry's size, none its bytes, and its bytes under another name that
    /// sorts last: eight are hashed, and the copy is not found. A second entry of that size hashes
    /// the next eight, not the first eight again.
    @Test func manyFilesOfTheEntrysSizeCostAtMostTheBudget() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-seed")
        let seed = try Self.seed(in: dir, decoys: 20)
        let sha = try TestData.writeFile(at: seed + "/zz.bin", size: Self.size, seed: 1)
        let folders = SeedFolders(paths: [seed])
        #expect(try folders.source(for: .fixture("a.bin", size: Self.size, sha256: .parsed(sha))) == nil)
        #expect(folders.hashes == 8)
        #expect(try folders.source(for: .fixture("b.bin", size: Self.size, sha256: .parsed(String(repeating: "0", count: 64)))) == nil)
        #expect(folders.hashes == 16)
    }

    /// The same seed with the entry's bytes also under its file name: that file is hashed first,
    /// and alone.
    @Test func aFileOfTheEntrysNameIsHashedFirst() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-seed")
        let seed = try Self.seed(in: dir, decoys: 20)
        try FileManager.default.createDirectory(atPath: seed + "/sub", withIntermediateDirectories: true)
        let sha = try TestData.writeFile(at: seed + "/sub/a.bin", size: Self.size, seed: 1)
        let folders = SeedFolders(paths: [seed + "/"])
        let found = try #require(folders.source(for: .fixture("set/a.bin", size: Self.size, sha256: .parsed(sha))))
        #expect(found.display == seed + "/sub/a.bin")
        #expect(folders.hashes == 1)
        // Asked again (a duplicate path): compared from memory, nothing hashed.
        #expect(try folders.source(for: .fixture("other/a.bin", size: Self.size, sha256: .parsed(sha))) != nil)
        #expect(folders.hashes == 1)
    }

    /// A symlink to a folder holding the bytes, and a symlink to the file itself: neither is a
    /// candidate, nothing is hashed, and the delta's older copy is not found through either.
    @Test func linksInASeedAreNeverFollowed() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-seed")
        let seed = try Self.seed(in: dir, decoys: 0)
        let hidden = dir.path("private")
        try FileManager.default.createDirectory(atPath: hidden, withIntermediateDirectories: true)
        let sha = try TestData.writeFile(at: hidden + "/a.bin", size: Self.size, seed: 1)
        #expect(symlink(hidden, seed + "/set") == 0)
        #expect(symlink(hidden + "/a.bin", seed + "/a.bin") == 0)
        let folders = SeedFolders(paths: [seed])
        #expect(try folders.source(for: .fixture("set/a.bin", size: Self.size, sha256: .parsed(sha))) == nil)
        #expect(folders.hashes == 0)
        #expect(folders.olderCopy(at: "set/a.bin") == nil)
        #expect(folders.olderCopy(at: "a.bin") == nil)
        let root = open(seed, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(root) }
        for resolver in [SafePath.Resolver.automatic, .walk] {
            let fd = SafePath.open(bytes: Array("set/a.bin".utf8), beneath: root, flags: O_RDONLY, resolver: resolver)
            #expect(fd < 0, "\(resolver) opened through the link")
            if fd >= 0 { close(fd) }
        }
    }

    /// A file whose name is not UTF-8 is found and opened by its bytes.
    @Test func aNameThatIsNotUTF8IsOpenedByItsBytes() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-seed")
        let seed = try Self.seed(in: dir, decoys: 0)
        let sha = try TestData.writeFile(at: dir.path("a.bin"), size: Self.size, seed: 1)
        let odd: [UInt8] = Array((seed + "/a").utf8) + [0xFF] + Array(".bin".utf8)
        #expect(odd.withCString { rename(dir.path("a.bin"), $0) } == 0)
        let folders = SeedFolders(paths: [seed])
        let found = try #require(folders.source(for: .fixture("a.bin", size: Self.size, sha256: .parsed(sha))))
        #expect(try found.file.stat().size == Self.size)
    }
}
