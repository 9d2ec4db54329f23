#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport

/// Walks and removals of a chain of folders 25,000 deep (a full path far past `PATH_MAX`): no
/// recursion, a bounded number of descriptors, and a cost that counts opens linear in the depth.
@Suite struct DeepTreeTests {
    static let depth = 25_000
    static let fileDepths: Set<Int> = [0, 1, 2, 5_000, 12_345, 24_999, 25_000]

    /// DEST (`dest` in a temporary folder) holding the chain, and `.mirror`, which walks skip.
    final class Chain {
        let dir: TemporaryDirectory
        let dest: String
        init(depth: Int = DeepTreeTests.depth, fileDepths: Set<Int> = DeepTreeTests.fileDepths) throws {
            dir = try TemporaryDirectory(prefix: "mirror-deep")
            dest = dir.path("dest")
            guard mkdir(dest, 0o755) == 0, mkdir(dest + "/.mirror", 0o755) == 0 else { throw HarnessError.posix("mkdir") }
            try DeepChain.make(in: dest, depth: depth, fileDepths: fileDepths)
        }
        deinit { DeepChain.remove(in: dest) }

        func destination() throws -> Destination {
            try #require(try Destination.openExisting(dest))
        }
    }

    @Test func walkSeesTheWholeChainAndRemoveFileTakesEachFile() throws {
        let chain = try Chain()
        let destination = try chain.destination()
        let tree = try destination.walk(skippingTopLevel: Destination.stateFolderName)
        #expect(tree.folders.count == Self.depth)
        #expect(tree.files.count == Self.fileDepths.count)
        let deepest = try #require(tree.files.max { $0.path.count < $1.path.count })
        #expect(deepest.path.count == Self.depth * 2 + 1, "d/ 25,000 times, then f")
        for file in tree.files {
            #expect(try destination.removeFile(file.path, expected: file.status) == .removed)
        }
        #expect(try destination.walk(skippingTopLevel: Destination.stateFolderName).files.isEmpty)
        #expect(DeepChain.depth(in: chain.dest) == Self.depth, "files only: the folders stay")
    }

    @Test func removeTreeTakesTheWholeChain() throws {
        let chain = try Chain()
        let top = FileDescriptor(fd: open(chain.dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC), displayPath: chain.dest)
        try #require(top.fd >= 0)
        try GenerationStore.removeTree("d", in: top)
        #expect(DeepChain.depth(in: chain.dest) == 0)
        #expect(faccessat(top.fd, "f", F_OK, AT_SYMLINK_NOFOLLOW) == 0, "only the tree named goes")
    }

    /// With 8 descriptors at most, the walk holds 8 and opens each folder at most twice (down, and
    /// up again through `..`).
    @Test func walkerHoldsAtMostItsDescriptorsAndOpensEachFolderAtMostTwice() throws {
        let chain = try Chain()
        let walker = try FolderWalker(FileDescriptor(fd: open(chain.dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC), displayPath: chain.dest),
                                      skippingTopLevel: Array(".mirror".utf8), maxOpen: 8)
        var (entered, left, files, deepest) = (0, 0, 0, 0)
        while let event = try walker.next() {
            switch event {
            case .enter: entered += 1
            case .leave: left += 1
            case .entry: files += 1
            }
            deepest = max(deepest, walker.depth)
        }
        #expect(entered == Self.depth && left == Self.depth && files == Self.fileDepths.count && deepest == Self.depth)
        #expect(walker.peakOpen <= 8)
        #expect(walker.opens <= 2 * Self.depth)
        #expect(walker.folder == -1, "every descriptor closed at the end")
    }

    /// Files at every 10th level removed one by one through one remover: the folders on the way
    /// are opened about once each (2,500 files from the root would open 31 million).
    @Test func removingFilesDepthFirstOpensEachFolderAboutOnce() throws {
        let chain = try Chain(fileDepths: Set(stride(from: 0, through: Self.depth, by: 10)))
        let destination = try chain.destination()
        let tree = try destination.walk(skippingTopLevel: Destination.stateFolderName)
        let remover = try destination.remover()
        for file in tree.files { #expect(try remover.removeFile(file.path, expected: file.status) == .removed) }
        #expect(tree.files.count == 2_501)
        #expect(remover.cursor.opens <= 2 * Self.depth)
        #expect(try destination.removeEmptyFolders(skippingTopLevel: Destination.stateFolderName, keeping: { _ in false }) == Self.depth)
        #expect(DeepChain.depth(in: chain.dest) == 0)
        #expect(faccessat(AT_FDCWD, chain.dest + "/.mirror", F_OK, 0) == 0, "the state folder stays")
    }

    /// A folder moved while the walk is below it, its descriptor closed: `..` leads elsewhere,
    /// and the walk stops (ESTALE) instead of going on there.
    @Test func aFolderMovedDuringTheWalkStopsIt() throws {
        let chain = try Chain(depth: 40, fileDepths: [])
        let walker = try FolderWalker(FileDescriptor(fd: open(chain.dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC), displayPath: chain.dest),
                                      skippingTopLevel: Array(".mirror".utf8), maxOpen: 4)
        while let event = try walker.next() {
            if case .enter = event, walker.depth == 40 { break }
        }
        // DEST/d/d/d moves to DEST/e: the walk's third folder now has DEST for a parent.
        #expect(rename(chain.dest + "/d/d/d", chain.dest + "/e") == 0)
        do {
            while try walker.next() != nil {}
            Issue.record("the walk went on past a moved folder")
        } catch let error as SystemError {
            #expect(error.code == ESTALE, "\(error)")
        }
        #expect(rename(chain.dest + "/e", chain.dest + "/d/d/d") == 0)
    }

    /// Folders a listed entry lies in stay; the others go once empty, the user's empty ones too.
    @Test func removeEmptyFoldersKeepsWhatItIsTold() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-deep")
        for folder in ["dest", "dest/.mirror", "dest/.mirror/x", "dest/a", "dest/a/b", "dest/a/c", "dest/a/c/d", "dest/e", "dest/g"] {
            #expect(mkdir(dir.path(folder), 0o755) == 0)
        }
        try TestData.writeFile(at: dir.path("dest/e/file"), size: 3, seed: 1)
        let destination = try #require(try Destination.openExisting(dir.path("dest")))
        var asked: [String] = []
        let removed = try destination.removeEmptyFolders(skippingTopLevel: ".mirror") { path in
            asked.append(String(decoding: path, as: UTF8.self))
            return path == Array("a".utf8) || path == Array("a/b".utf8)
        }
        #expect(removed == 3, "a/c/d, a/c, g")
        #expect(Set(asked) == ["a", "a/b", "a/c", "e", "g"], "never a folder in one that is not kept")
        for kept in ["a", "a/b", "e", "e/file", ".mirror/x"] { #expect(faccessat(AT_FDCWD, dir.path("dest/" + kept), F_OK, 0) == 0, "\(kept)") }
        for gone in ["a/c", "g"] { #expect(faccessat(AT_FDCWD, dir.path("dest/" + gone), F_OK, 0) != 0, "\(gone)") }
    }
}
