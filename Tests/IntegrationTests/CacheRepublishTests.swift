import Foundation
import Testing
import MirrorCore
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A republish in place behind the documented site cache (docs/fleet.md, "Republishing with a
/// cache"): the cache still holds the old slices and the old chunk index, and each machine's first
/// run of the new version must cost the origin only what changed.
@Suite(.serialized) struct CacheRepublishTests {
    static let mib: Int64 = 1 << 20

    static func createManifest(_ fx: SyncFixture, cache: SiteCache) throws {
        let run = try Mirror.run(["manifest", "create", fx.www, "--base-url", cache.baseURL,
                            "--chunks", "-o", fx.manifestPath], timeout: 120)
        try #require(run.exitCode == 0, "\(run)")
    }

    /// v1: an 80 MiB image and a folder of notes; v2, published at the same URLs: 1 MiB edited in
    /// the middle of the image, the folder renamed, a file added and one removed. Three machines
    /// sync v1 through the cache, then v2: each exits 0 on its first v2 run, and the origin sends
    /// for v2 at most the slices covering the edit, the new file and the chunk index (the manifest
    /// is read from disk here).
    @Test func aRepublishThroughTheCacheCostsTheChangedSlices() throws {
        let fx = try SyncFixture()
        let cache = try SiteCache(origin: fx.server)
        try TestData.writeFile(at: fx.www + "/set/lab.img", size: 80 * Self.mib, seed: 7)
        for (i, name) in ["a.txt", "b.txt"].enumerated() { try TestData.writeFile(at: fx.www + "/notes/" + name, size: 200_000, seed: UInt64(20 + i)) }
        try Self.createManifest(fx, cache: cache)
        let machines = (1...3).map { fx.dir.path("machine\($0)") }
        for dest in machines {
            let run = try SiteCacheTests.sync(fx, into: dest, ["--summary"])
            try #require(run.exitCode == 0, "v1: \(run)")
        }
        let originBefore = try SiteCacheTests.originBytes(fx)

        // The republish: 1 MiB rewritten at 40 MiB, notes/ renamed to docs/, b.txt gone, c.txt new.
        let fd = open(fx.www + "/set/lab.img", O_WRONLY)
        try #require(fd >= 0)
        var edit = [UInt8](repeating: 0, count: Int(Self.mib))
        var rng = SeededRandom(seed: 99)
        for i in edit.indices { edit[i] = UInt8(truncatingIfNeeded: rng.next()) }
        try #require(pwrite(fd, edit, edit.count, off_t(40 * Self.mib)) == edit.count)
        close(fd)
        try FileManager.default.moveItem(atPath: fx.www + "/notes", toPath: fx.www + "/docs")
        try FileManager.default.removeItem(atPath: fx.www + "/docs/b.txt")
        try TestData.writeFile(at: fx.www + "/docs/c.txt", size: 300_000, seed: 30)
        try FileManager.default.removeItem(atPath: fx.www + "/.mirror-chunks")
        try Self.createManifest(fx, cache: cache)
        let expected = try TestData.sha256(ofFileAt: fx.www + "/set/lab.img")

        for dest in machines {
            let run = try SiteCacheTests.sync(fx, into: dest, ["--summary"])
            #expect(run.exitCode == 0, "v2 on \(dest): \(run)")
            #expect(try TestData.sha256(ofFileAt: dest + "/set/lab.img") == expected)
            #expect(FileManager.default.fileExists(atPath: dest + "/docs/c.txt"))
        }
        let sent = try SiteCacheTests.originBytes(fx) - originBefore
        let index = Int64((try? FileManager.default.attributesOfItem(atPath: fx.www + "/.mirror-chunks/set/lab.img")[.size] as? Int) ?? 0)
        print("measured: republish through the cache, 3 machines: origin sent \(sent) bytes for v2 (chunk index \(index) bytes)")
        // The edit spans at most 2 slices of 1 MiB (3 when chunk edges reach into a third), c.txt,
        // and the chunk index; the origin may send at most 4 MiB for it.
        #expect(sent <= 4 * Self.mib, "the origin sent \(sent) bytes for a 1 MiB edit, a rename and a new file")
    }
}
