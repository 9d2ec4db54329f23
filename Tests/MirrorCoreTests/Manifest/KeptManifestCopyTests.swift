#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import MirrorCore
import MirrorTestSupport

/// The copy of a remote manifest kept under `DEST/.mirror/manifest/` (issue 17): it is written with
/// unguessable temporary names.
@Suite struct KeptManifestCopyTests {
    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & 0o7777 : nil
    }

    static func folder(_ path: String) throws -> FileDescriptor {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        try #require(fd >= 0)
        return FileDescriptor(fd: fd, displayPath: path)
    }

    /// A folder planted at the temporary name the old code used (`.NAME.tmp-<pid>`) made it
    /// recurse until it crashed (SIGSEGV); now the name is random, the folder is left alone and
    /// the file is replaced, at the mode asked for whatever the umask.
    @Test func aFolderAtThePidTemporaryNameIsNotInTheWay() throws {
        let dir = try TemporaryDirectory(prefix: "kept-copy")
        let planted = dir.path(".last.yaml.tmp-\(getpid())")
        try FileManager.default.createDirectory(atPath: planted + "/inside", withIntermediateDirectories: true)
        try Data("old".utf8).write(to: URL(fileURLWithPath: dir.path("last.yaml")))
        let folder = try Self.folder(dir.path)

        try replaceFileAtomically(folder: folder, name: "last.yaml", bytes: Array("new\n".utf8), mode: 0o600)
        #expect(FileManager.default.contents(atPath: dir.path("last.yaml")) == Data("new\n".utf8))
        #expect(Self.mode(dir.path("last.yaml")) == 0o600)
        #expect(FileManager.default.fileExists(atPath: planted + "/inside"), "the planted folder is left alone")
        let left = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        #expect(left == [".last.yaml.tmp-\(getpid())", "last.yaml"], "no temporary file is left: \(left)")
    }

    /// The temporary names differ from call to call (they cannot be planted in advance).
    @Test func temporaryNamesAreUnpredictable() throws {
        let dir = try TemporaryDirectory(prefix: "kept-copy")
        // A symlink at a name cannot catch the write either: O_EXCL | O_NOFOLLOW never opens it.
        #expect(symlink("/nonexistent-target", dir.path(".m.tmp-\(getpid())")) == 0)
        let folder = try Self.folder(dir.path)
        for i in 0..<20 { try replaceFileAtomically(folder: folder, name: "m", bytes: [UInt8(i)]) }
        #expect(FileManager.default.contents(atPath: dir.path("m")) == Data([19]))
        #expect(Self.mode(dir.path("m")) == 0o644)
        #expect(!FileManager.default.fileExists(atPath: "/nonexistent-target"))
    }
}
