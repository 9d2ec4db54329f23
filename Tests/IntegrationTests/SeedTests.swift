#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// `--seed` folders read like DEST (docs/cli.md, "Reuse by content"): opened once, walked and read
/// beneath their descriptor without following a link, names as bytes, within a hashing budget.
@Suite(.serialized) struct SeedTests {
    static let size: Int64 = 1 << 20

    /// A folder only its owner may enter, holding a copy of `www/name` under its file name: what a
    /// link in a seed would lead to.
    static func privateCopy(_ fx: SyncFixture, of name: String) throws -> String {
        let hidden = fx.dir.path("private")
        try FileManager.default.createDirectory(atPath: hidden, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: fx.www + "/" + name, toPath: hidden + "/" + (name as NSString).lastPathComponent)
        chmod(hidden, 0o700)
        return hidden
    }

    static func sent(_ fx: SyncFixture, after skip: Int) throws -> Int64 {
        try fx.requests(atLeast: skip + 1).dropFirst(skip).reduce(0) { $0 + $1.bodyBytesSent }
    }

    /// A seed whose folder `set` is a symlink to a folder holding the entry's bytes, and whose
    /// `a.bin` is a symlink to that file: neither is read; the file is downloaded. The same bytes
    /// at a real path in the seed are copied.
    @Test func linksInASeedAreNotFollowedARealPathIs() throws {
        let fx = try SyncFixture()
        try fx.addFile("set/a.bin", size: Self.size, seed: 1)
        try fx.writeManifest()
        let hidden = try Self.privateCopy(fx, of: "set/a.bin")
        let seed = fx.dir.path("usb")
        try FileManager.default.createDirectory(atPath: seed, withIntermediateDirectories: true)
        #expect(symlink(hidden, seed + "/set") == 0)
        #expect(symlink(hidden + "/a.bin", seed + "/a.bin") == 0)

        let run = try fx.sync(["--seed", seed])
        #expect(run.exitCode == 0, "\(run)")
        #expect(!run.stdout.contains("copied"), "\(run.stdout)")
        #expect(try Self.sent(fx, after: 0) == Self.size, "the file was not downloaded")

        try FileManager.default.removeItem(atPath: fx.dest)
        try FileManager.default.createDirectory(atPath: seed + "/old", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: hidden + "/a.bin", toPath: seed + "/old/a.bin")
        let before = try fx.requests(atLeast: 1).count
        let again = try fx.sync(["--seed", seed])
        #expect(again.exitCode == 0, "\(again)")
        #expect(again.stdout.contains("copied set/a.bin (1.0 MiB) from \(seed)/old/a.bin"), "\(again.stdout)")
        #expect(try fx.requestsSoFar().count == before, "copied, not fetched")
    }

    /// The seed's folder `set` holds a file of the entry's size when the walk sees it; the run is
    /// stopped right after the walk (`MIRROR_STOP_AT=seed-after-walk`), `set` is swapped for a
    /// symlink to a folder holding the entry's bytes, and the run goes on: the open beneath the
    /// seed refuses the link, and the file is downloaded.
    @Test func aFolderSwappedForALinkAfterTheWalkIsNotFollowed() throws {
        let fx = try SyncFixture()
        try fx.addFile("set/a.bin", size: Self.size, seed: 1)
        try fx.writeManifest()
        let hidden = try Self.privateCopy(fx, of: "set/a.bin")
        let seed = fx.dir.path("usb")
        try FileManager.default.createDirectory(atPath: seed + "/set", withIntermediateDirectories: true)
        try TestData.writeFile(at: seed + "/set/a.bin", size: Self.size, seed: 2)

        let run = try Mirror.start(["sync", fx.manifestPath, "--dest", fx.dest, "--seed", seed],
                                   environment: ["MIRROR_STOP_AT": "seed-after-walk"])
        defer { run.signal(SIGKILL) }
        try Wait.until("the run stopped after the walk or ended", timeout: 60) {
            SharedDestination.isStopped(run.pid) || Self.hasEnded(run.pid)
        }
        #expect(SharedDestination.isStopped(run.pid), "the run never stopped at seed-after-walk")
        try FileManager.default.moveItem(atPath: seed + "/set", toPath: seed + "/set-was")
        #expect(symlink(hidden, seed + "/set") == 0)
        run.signal(SIGCONT)
        let done = try run.wait(timeout: 120)
        #expect(done.exitCode == 0, "\(done)")
        #expect(!done.stdout.contains("copied"), "\(done.stdout)")
        #expect(try Self.sent(fx, after: 0) == Self.size, "the file was not downloaded")
    }

    /// Whether `pid` has exited (a zombie not yet waited for, or gone).
    static func hasEnded(_ pid: pid_t) -> Bool {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return true }
        return text[text.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    /// A seed file whose name is not UTF-8 is read by its bytes, not by the text they decode to.
    @Test func aSeedFileNamedInBytesThatAreNotUTF8IsCopied() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: Self.size, seed: 3)
        try fx.writeManifest()
        let seed = fx.dir.path("usb")
        try FileManager.default.createDirectory(atPath: seed, withIntermediateDirectories: true)
        let odd: [UInt8] = Array((seed + "/old").utf8) + [0xFF] + Array(".bin".utf8)
        try FileManager.default.copyItem(atPath: fx.www + "/a.bin", toPath: seed + "/plain")
        let oddName = odd.map { CChar(bitPattern: $0) } + [0]
        #expect(rename(seed + "/plain", oddName) == 0)
        let run = try fx.sync(["--seed", seed])
        #expect(run.exitCode == 0, "\(run)")
        #expect(run.stdout.contains("copied a.bin"), "\(run.stdout)")
        #expect(try fx.requestsSoFar().isEmpty, "copied, not fetched")
    }

    /// Twenty files of the entry's size with other bytes, and its bytes under a name that sorts
    /// after them: the budget (8 hashed per entry) ends before that file, and the entry is
    /// downloaded. With a copy under the entry's file name too, that copy is hashed first and used.
    @Test func manyFilesOfTheEntrysSizeAreHashedWithinTheBudgetTheNamedOneFirst() throws {
        let fx = try SyncFixture()
        try fx.addFile("set/a.bin", size: 64 << 10, seed: 4)
        try fx.writeManifest()
        let seed = fx.dir.path("usb")
        try FileManager.default.createDirectory(atPath: seed + "/sub", withIntermediateDirectories: true)
        for i in 0 ..< 20 { try TestData.writeFile(at: seed + String(format: "/d%02d.bin", i), size: 64 << 10, seed: UInt64(100 + i)) }
        try FileManager.default.copyItem(atPath: fx.www + "/set/a.bin", toPath: seed + "/zz.bin")

        let run = try fx.sync(["--seed", seed])
        #expect(run.exitCode == 0, "\(run)")
        #expect(!run.stdout.contains("copied"), "the ninth candidate or later was hashed: \(run.stdout)")
        #expect(try Self.sent(fx, after: 0) == 64 << 10)

        try FileManager.default.removeItem(atPath: fx.dest)
        try FileManager.default.copyItem(atPath: fx.www + "/set/a.bin", toPath: seed + "/sub/a.bin")
        let before = try fx.requests(atLeast: 1).count
        let again = try fx.sync(["--seed", seed])
        #expect(again.exitCode == 0, "\(again)")
        #expect(again.stdout.contains("copied set/a.bin (64.0 KiB) from \(seed)/sub/a.bin"), "\(again.stdout)")
        #expect(try fx.requestsSoFar().count == before, "copied, not fetched")
    }

    /// A chunk delta's older copy in a seed is opened beneath it too: v1 behind a symlinked folder
    /// is no base (v2 is downloaded whole); at a real path it is (a few chunks are fetched).
    @Test func aDeltasOlderCopyBehindALinkIsNoBase() throws {
        let fx = try SyncFixture()
        let image = fx.www + "/set/b.img"
        try TestData.writeFile(at: image, size: 16 << 20, seed: 71)
        let hidden = fx.dir.path("private")
        try FileManager.default.createDirectory(atPath: hidden, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: image, toPath: hidden + "/b.img")
        chmod(hidden, 0o700)
        var v2 = [UInt8](try Data(contentsOf: URL(fileURLWithPath: image)))
        v2.replaceSubrange(5000 ..< 9096, with: TestData.bytes(count: 4096, seed: 72))
        try Data(v2).write(to: URL(fileURLWithPath: image))
        try DeltaTests.publish(fx, ["--chunks-above", "1M"])
        let seed = fx.dir.path("usb")
        try FileManager.default.createDirectory(atPath: seed, withIntermediateDirectories: true)
        #expect(symlink(hidden, seed + "/set") == 0)

        let run = try fx.sync(["--seed", seed])
        #expect(run.exitCode == 0, "\(run)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("set/b.img")) == TestData.sha256(of: v2))
        let whole = try Self.sent(fx, after: 0)
        #expect(whole >= 16 << 20, "the server sent \(whole) bytes: v1 behind the link was the base")

        try FileManager.default.removeItem(atPath: fx.dest)
        try FileManager.default.removeItem(atPath: seed + "/set")
        try FileManager.default.createDirectory(atPath: seed + "/set", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: hidden + "/b.img", toPath: seed + "/set/b.img")
        let before = try fx.requests(atLeast: 1).count
        let again = try fx.sync(["--seed", seed])
        #expect(again.exitCode == 0, "\(again)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("set/b.img")) == TestData.sha256(of: v2))
        let delta = try Self.sent(fx, after: before)
        #expect(delta < 1 << 20, "the server sent \(delta) bytes for one 4 KiB edit")
    }
}
