#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import MirrorCore
@testable import MirrorFS
@testable import MirrorModel
import MirrorTestSupport

/// The copy of a remote manifest kept under `DEST/.mirror/manifest/` (SECURITY.md): it is written with
/// unguessable temporary names, at mode 0600, with its digest, and read back only when it is still
/// what this user kept.
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

    static let yaml = Array("version: 1\nbase_url: https://x.example/\nfiles:\n  - {path: a, size: 1, sha256: \(String(repeating: "ab", count: 32))}\n".utf8)

    static func cache(_ dir: TemporaryDirectory) -> RemoteManifest.Cache {
        RemoteManifest.Cache(destination: dir.path("dest"))
    }

    static func validators() -> RemoteManifest.Validators {
        RemoteManifest.Validators(url: "https://x.example/m.yaml", etag: "\"e1\"", lastModified: nil)
    }

    /// What was written reads back, private (0600 files in a 0700 folder) with both digests.
    @Test func aKeptCopyReadsBackAndIsPrivate() throws {
        let dir = try TemporaryDirectory(prefix: "kept-copy")
        let cache = Self.cache(dir)
        #expect(try cache.write(bytes: Self.yaml, signature: [1, 2, 3], validators: Self.validators()) == nil)
        let folder = dir.path("dest/.mirror/manifest")
        #expect(Self.mode(folder) == 0o700)
        for name in ["last.yaml", "last.yaml.sig", "last.validators"] { #expect(Self.mode(folder + "/" + name) == 0o600, "\(name)") }
        let saved = try #require(cache.read().saved)
        #expect(saved.bytes == Self.yaml && saved.signature == [1, 2, 3] && saved.validators == Self.validators())
        let record = try String(contentsOfFile: folder + "/last.validators", encoding: .utf8)
        #expect(record.contains("sha256\t\(RemoteManifest.Cache.sha256(Self.yaml))\n"))
    }

    /// Each way the copy can differ from what was kept makes it unusable, with a reason.
    @Test(arguments: ["bytes", "signature added", "signature changed", "no digest", "group-writable", "folder open", "symlink"])
    func aCopyThatIsNotWhatWasKeptIsDiscarded(change: String) throws {
        let dir = try TemporaryDirectory(prefix: "kept-copy")
        let cache = Self.cache(dir)
        _ = try cache.write(bytes: Self.yaml, signature: change == "signature changed" ? [9] : nil, validators: Self.validators())
        let folder = dir.path("dest/.mirror/manifest")
        let copy = folder + "/last.yaml"
        switch change {
        case "bytes": try Data(Self.yaml + Array("# planted\n".utf8)).write(to: URL(fileURLWithPath: copy))
        case "signature added": try Data([7]).write(to: URL(fileURLWithPath: folder + "/last.yaml.sig"))
        case "signature changed": try Data([8]).write(to: URL(fileURLWithPath: folder + "/last.yaml.sig"))
        case "no digest": try Data("url\thttps://x.example/m.yaml\netag\t\"e1\"\n".utf8).write(to: URL(fileURLWithPath: folder + "/last.validators"))
        case "group-writable": #expect(chmod(copy, 0o620) == 0)
        case "folder open": #expect(chmod(folder, 0o777) == 0)
        default:
            let aside = dir.path("aside.yaml")
            #expect(rename(copy, aside) == 0 && symlink(aside, copy) == 0)
        }
        guard case .discarded(let why) = cache.read() else {
            Issue.record("a copy with \(change) was not discarded")
            return
        }
        #expect(why.contains(".mirror/manifest"), "the reason names the file: \(why)")
    }

    /// Nothing there is no copy at all (no warning); a copy written by an older mirror (no digest)
    /// is discarded once, and the next write makes it usable.
    @Test func noCopyAndARewrittenCopy() throws {
        let dir = try TemporaryDirectory(prefix: "kept-copy")
        let cache = Self.cache(dir)
        guard case .none = cache.read() else { Issue.record("an empty DEST has a copy"); return }
        _ = try cache.write(bytes: Self.yaml, signature: nil, validators: Self.validators())
        try Data("url\tx\n".utf8).write(to: URL(fileURLWithPath: dir.path("dest/.mirror/manifest/last.validators")))
        #expect(cache.read().saved == nil)
        _ = try cache.write(bytes: Self.yaml, signature: nil, validators: Self.validators())
        #expect(cache.read().saved != nil)
    }

    /// A URL with user-info anywhere in a manifest keeps it off the disk.
    @Test func credentialsInAManifestAreFound() throws {
        func manifest(base: String?, mirrors: [String] = [], entry: ManifestEntry.Location) -> Manifest {
            Manifest(sourceName: "m", baseURL: base, mirrors: mirrors,
                     entries: [ManifestEntry(path: "a", url: entry, size: 1, digests: [:])])
        }
        #expect(RemoteManifest.credentialURL(in: manifest(base: "https://u:p@x/", entry: .relative("a"))) == "https://u:p@x/")
        #expect(RemoteManifest.credentialURL(in: manifest(base: "https://x/", mirrors: ["http://u@y/"], entry: .relative("a"))) == "http://u@y/")
        #expect(RemoteManifest.credentialURL(in: manifest(base: nil, entry: .absolute("https://u:p@z/a"))) == "https://u:p@z/a")
        #expect(RemoteManifest.credentialURL(in: manifest(base: "https://x/", entry: .relative("//u:p@w/a"))) == "//u:p@w/a")
        #expect(RemoteManifest.credentialURL(in: manifest(base: "https://x/a@b/", entry: .relative("c@d"))) == nil)
    }

    /// A gzip manifest may expand to 128 times its size (at least 64 MiB, at most 1 GiB), and the
    /// error says so.
    @Test func gzipExpansionIsBoundedByTheCompressedSize() throws {
        #expect(Gzip.limit(forCompressedSize: 100) == 64 << 20)
        #expect(Gzip.limit(forCompressedSize: 2 << 20) == 256 << 20)
        #expect(Gzip.limit(forCompressedSize: 100 << 20) == 1 << 30)
        #expect(Gzip.limit(forCompressedSize: Int.max) == 1 << 30)
        // 80 MiB of zeros gzip to about 80 KB: past the 64 MiB floor.
        let zeros = [UInt8](repeating: 0, count: 80 << 20)
        let bomb = try Self.gzip(zeros)
        #expect(bomb.count < 200_000)
        do {
            _ = try Gzip.decompress(bomb)
            Issue.record("an 80 MiB expansion of \(bomb.count) bytes was accepted")
        } catch let failure as Gzip.Failure {
            #expect(failure.message.contains("exceeds 64 MiB"), "\(failure.message)")
            #expect(failure.message.contains("128 times its size"), "\(failure.message)")
        }
    }

    static func gzip(_ bytes: [UInt8]) throws -> [UInt8] {
        let dir = try TemporaryDirectory(prefix: "kept-copy")
        try Data(bytes).write(to: URL(fileURLWithPath: dir.path("z")))
        let result = try ChildProcess.run("/bin/sh", ["-c", "gzip -c < '\(dir.path("z"))' > '\(dir.path("z.gz"))'"])
        try #require(result.exitCode == 0)
        return Array(try Data(contentsOf: URL(fileURLWithPath: dir.path("z.gz"))))
    }
}
