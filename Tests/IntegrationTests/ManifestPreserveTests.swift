import Foundation
import Testing
import MirrorCore
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `manifest create --preserve` and `--chunks-dir` (docs/cli.md, "mirror manifest create"), the
/// built binary against nginx: the copies a sync makes keep the publisher's modification times and
/// permission bits, and a client finds indexes kept outside the published tree where it always
/// asks, `base_url` + `.mirror-chunks/PATH`, which the server maps to the chunks folder.
@Suite(.serialized) struct ManifestPreserveTests {
    static func status(_ path: String) -> stat? {
        var st = stat()
        return stat(path, &st) == 0 ? st : nil
    }

    static func setTime(_ path: String, seconds: Int, nanoseconds: Int) {
        var times = [timespec(tv_sec: seconds, tv_nsec: nanoseconds), timespec(tv_sec: seconds, tv_nsec: nanoseconds)]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0, "\(path)")
    }

    @Test func copiesKeepThePublishersTimesAndModes() throws {
        let fx = try SyncFixture()
        let files: [(path: String, mode: mode_t, seconds: Int, nanoseconds: Int)] = [
            ("a.bin", 0o640, 1_614_834_367, 250_000_000),
            ("bin/tool", 0o755, 1_500_000_000, 0),
            ("notes/private.txt", 0o600, 1_000_000_001, 123_456_789),
        ]
        for (i, file) in files.enumerated() {
            try TestData.writeFile(at: fx.www + "/" + file.path, size: Int64(1000 + i * 70_001), seed: UInt64(80 + i))
            #expect(chmod(fx.www + "/" + file.path, file.mode) == 0)
            Self.setTime(fx.www + "/" + file.path, seconds: file.seconds, nanoseconds: file.nanoseconds)
        }
        let created = try Mirror.run(["manifest", "create", fx.www, "--base-url", fx.server.baseURL, "--preserve", "-o", fx.manifestPath])
        #expect(created.exitCode == 0, "\(created)")
        #expect(created.stdout.isEmpty)
        #expect(created.stderr == "mirror: wrote \(fx.manifestPath): 3 files, 208.0 KiB (213003 bytes), 0 chunk indexes\n", "\(created.stderr)")
        let quiet = try Mirror.run(["manifest", "create", fx.www, "--base-url", fx.server.baseURL, "--preserve", "--quiet", "-o", fx.dir.path("q.yaml")])
        #expect(quiet.exitCode == 0 && quiet.stderr.isEmpty, "\(quiet)")

        let sync = try fx.sync()
        #expect(sync.exitCode == 0, "\(sync)")
        for file in files {
            let st = try #require(Self.status(fx.destPath(file.path)), "\(file.path)")
            #expect(st.st_mode & 0o7777 == file.mode, "\(file.path): mode \(String(st.st_mode & 0o7777, radix: 8))")
            #expect(st.st_mtim.tv_sec == file.seconds && st.st_mtim.tv_nsec == file.nanoseconds,
                    "\(file.path): mtime \(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)")
        }
        let verify = try Mirror.run(["verify", fx.manifestPath, "--dest", fx.dest])
        #expect(verify.exitCode == 0, "\(verify)")
    }

    /// DEST holds v1 of an 8 MiB image; v2 (one 4 KiB edit) is published with its index in a
    /// folder beside the tree, which nginx serves at `/.mirror-chunks/`: the sync fetches the
    /// index from there and only the chunks it lacks.
    @Test func aDeltaFindsIndexesWrittenOutsideTheTree() throws {
        let fx = try SyncFixture(nginxFor: { www in
            let chunks = URL(fileURLWithPath: www).deletingLastPathComponent().path + "/chunks"
            return NginxServer.Options(extraServerConfig: "location /.mirror-chunks/ { alias \(chunks)/; }")
        })
        let chunks = fx.dir.path("chunks")
        let image = fx.www + "/set/a.img"
        try TestData.writeFile(at: image, size: 8 << 20, seed: 93)
        let publish = ["manifest", "create", fx.www, "--base-url", fx.server.baseURL, "--chunks-dir", chunks,
                       "--chunks-above", "1M", "-o", fx.manifestPath]
        #expect(try Mirror.run(publish).exitCode == 0)
        #expect(try fx.sync().exitCode == 0)
        let before = try fx.requestsSoFar().count

        var v2 = [UInt8](try Data(contentsOf: URL(fileURLWithPath: image)))
        v2.replaceSubrange(3_000_000 ..< 3_004_096, with: TestData.bytes(count: 4096, seed: 94))
        try Data(v2).write(to: URL(fileURLWithPath: image))
        let created = try Mirror.run(publish)
        #expect(created.exitCode == 0, "\(created)")
        #expect(created.stderr.contains(": 1 file, 8.0 MiB (8388608 bytes), 1 chunk index"), "\(created.stderr)")
        #expect(!fx.exists(fx.www + "/.mirror-chunks"), "nothing is written into the published tree")
        #expect(fx.exists(chunks + "/set/a.img"))

        let run = try fx.sync()
        #expect(run.exitCode == 0, "\(run)")
        #expect(!run.stderr.contains("no delta"), "\(run.stderr)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("set/a.img")) == TestData.sha256(of: v2))
        let requests = Array(try fx.requests(atLeast: before + 2).dropFirst(before))
        #expect(requests.contains { $0.uri == "/.mirror-chunks/set/a.img" && $0.status == 200 }, "\(requests)")
        let sent = requests.filter { $0.uri == "/set/a.img" }.reduce(Int64(0)) { $0 + $1.bodyBytesSent }
        #expect(sent < 1 << 20, "the server sent \(sent) bytes of the image for one 4 KiB edit: \(requests)")
    }
}
