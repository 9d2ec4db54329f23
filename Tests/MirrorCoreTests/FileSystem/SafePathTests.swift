import Foundation
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport

/// ``SafePath`` refuses every way out of its folder, with openat2 and with the fallback walk alike.
@Suite struct SafePathTests {
    final class Tree {
        let dir: TemporaryDirectory
        let root: Int32
        init() throws {
            dir = try TemporaryDirectory(prefix: "mirror-safepath")
            try FileManager.default.createDirectory(atPath: dir.path("in/a/b"), withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: dir.path("out/b"), withIntermediateDirectories: true)
            try TestData.writeFile(at: dir.path("in/a/b/f"), size: 10, seed: 1)
            try TestData.writeFile(at: dir.path("out/b/f"), size: 10, seed: 2)
            try TestData.writeFile(at: dir.path("out/secret"), size: 10, seed: 3)
            guard symlink(dir.path("out"), dir.path("in/link")) == 0,
                  symlink(dir.path("out/secret"), dir.path("in/a/lnk")) == 0,
                  symlink("b", dir.path("in/a/rel")) == 0 else { throw HarnessError.posix("symlink") }
            root = open(dir.path("in"), O_RDONLY | O_DIRECTORY)
            guard root >= 0 else { throw HarnessError.posix("open") }
        }
        deinit { close(root) }

        /// The errno of opening `path` (0 on success, the descriptor closed).
        func errno(_ path: String, _ flags: Int32 = O_RDONLY, _ resolver: SafePath.Resolver) -> Int32 {
            let fd = SafePath.open(path, beneath: root, flags: flags, mode: 0o600, resolver: resolver)
            if fd >= 0 { close(fd); return 0 }
            return Glibc.errno
        }
    }

    @Test(arguments: [SafePath.Resolver.automatic, .walk])
    func opensBeneathAndRefusesEveryWayOut(resolver: SafePath.Resolver) throws {
        let tree = try Tree()
        #expect(tree.errno("a/b/f", O_RDONLY, resolver) == 0)
        #expect([ELOOP, ENOTDIR].contains(tree.errno("link/b/f", O_RDONLY, resolver)), "a symlinked folder")
        #expect(tree.errno("a/lnk", O_RDONLY, resolver) == ELOOP, "a symlink as the last component")
        #expect(tree.errno("a/lnk", O_WRONLY | O_CREAT | O_TRUNC, resolver) == ELOOP, "not created through a link")
        #expect([ELOOP, ENOTDIR].contains(tree.errno("a/rel/f", O_RDONLY, resolver)), "even a link that stays inside")
        #expect(tree.errno("../out/secret", O_RDONLY, resolver) == EXDEV)
        #expect(tree.errno(tree.dir.path("out/secret"), O_RDONLY, resolver) == EXDEV, "an absolute path")
        #expect(tree.errno("a/./b/f", O_RDONLY, resolver) == EXDEV)
        #expect(tree.errno("a//b/f", O_RDONLY, resolver) == EXDEV)
        #expect(tree.errno("a/b/new", O_WRONLY | O_CREAT | O_EXCL, resolver) == 0)
        #expect(tree.errno("a/b/new", O_WRONLY | O_CREAT | O_EXCL, resolver) == EEXIST)
        #expect(try TestData.sha256(ofFileAt: tree.dir.path("out/secret")) == TestData.sha256(of: TestData.bytes(count: 10, seed: 3)))
    }

    /// The byte-level check the fast path uses agrees with splitting the path into components.
    @Test func thePlainRelativeCheckAgreesWithTheComponents() {
        let paths = ["a", "a/b", "a/b/c.d", ".a", "a/.b", "...", "a/.../b", "..a", "a..", "", "/", "/a", "a/", "a//b", ".",
                     "..", "./a", "a/./b", "a/..", "../a", "a/b/..", "a\u{0}b", "д/é.bin", "a b/c=d%e"]
        for path in paths {
            #expect(SafePath.isPlainRelative(path) == (SafePath.components(of: path) != nil), "\(path.debugDescription)")
        }
    }

    @Test func aHardLinkIsNotASoleFile() throws {
        let tree = try Tree()
        let fd = open(tree.dir.path("in/a/b/f"), O_RDONLY)
        defer { close(fd) }
        try SafePath.requireSoleRegularFile(fd, "f")
        #expect(link(tree.dir.path("in/a/b/f"), tree.dir.path("in/f2")) == 0)
        #expect(throws: SystemError.self) { try SafePath.requireSoleRegularFile(fd, "f") }
    }
}
