#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import MirrorFS
import MirrorTestSupport

/// ``FileCount``: what an atomic no-op counts to know that the set holds nothing but the
/// manifest's files.
@Suite struct FileCountTests {
    /// Files, symlinks (never followed) and a FIFO count, at the top and at any depth; folders,
    /// empty or not, do not; the top-level name skipped is not looked into.
    @Test func countsEverythingButFolders() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-count")
        let top = dir.path("set")
        for folder in ["a/b/c", "empty", "e/f", ".mirror/partial"] {
            try FileManager.default.createDirectory(atPath: top + "/" + folder, withIntermediateDirectories: true)
        }
        for file in ["top", "a/one", "a/b/two", "a/b/c/three", "e/f/four", ".mirror/journal", ".mirror/partial/x"] {
            try Data("x".utf8).write(to: URL(fileURLWithPath: top + "/" + file))
        }
        #expect(symlink("a", top + "/link-to-folder") == 0)
        #expect(symlink("/nonexistent", top + "/e/dangling") == 0)
        #expect(mkfifo(top + "/a/fifo", 0o600) == 0)

        let root = try KeptManifestCopyTests.folder(top)
        defer { root.close() }
        #expect(try FileCount.nonFolders(under: root, skippingTopLevel: Array(".mirror".utf8)) == 8)
        #expect(try FileCount.nonFolders(under: root, skippingTopLevel: nil) == 10)
        // The root's descriptor is the caller's, and still lists from the start.
        #expect(try FileCount.nonFolders(under: root, skippingTopLevel: nil) == 10)
    }

    /// A folder deeper than ``FileCount/maxDepth`` is not counted: nil, and the caller walks.
    @Test func aTreeTooDeepIsNotCounted() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-count")
        let top = dir.path("set")
        let deep = (0 ... FileCount.maxDepth).map { _ in "d" }.joined(separator: "/")
        try FileManager.default.createDirectory(atPath: top + "/" + deep, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: top + "/" + deep + "/f"))
        let root = try KeptManifestCopyTests.folder(top)
        defer { root.close() }
        #expect(try FileCount.nonFolders(under: root, skippingTopLevel: nil) == nil)

        let shallow = (1 ..< FileCount.maxDepth).map { _ in "s" }.joined(separator: "/")
        let other = dir.path("other")
        try FileManager.default.createDirectory(atPath: other + "/" + shallow, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: other + "/" + shallow + "/f"))
        let otherRoot = try KeptManifestCopyTests.folder(other)
        defer { otherRoot.close() }
        #expect(try FileCount.nonFolders(under: otherRoot, skippingTopLevel: nil) == 1)
    }
}
