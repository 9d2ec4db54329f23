import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// Sequences in which the manifest changes between runs, with kills and stops in between: the
/// journal's record for a path must never vouch for bytes of another version: not after a kill,
/// not for a name spelled NFC and NFD, not for a partial whose entry left (docs/faults.md, rows
/// D1, D7, D9).
@Suite(.serialized) struct ManifestChangeTests {
    /// D1: `sync mA --deadline` leaves a journaled partial of A; `sync mB` restarts the same path
    /// from zero and is killed before its first checkpoint; `sync mA` must not restore A's hash
    /// state over B's bytes (before the fix: exit 0 with a file that is not A, "up to date" ever after).
    @Test(arguments: [false, true])
    func aKilledSyncOfAnotherVersionNeverLeavesMixedBytes(segmented: Bool) throws {
        let flags = segmented ? ["--segments", "4", "--segments-above", "1M"] : ["--segments", "1"]
        let fx = try SyncFixture(nginx: .init(limitRate: "500k"))
        let size: Int64 = 4_000_000
        let shaA = try TestData.writeFile(at: fx.www + "/a/data.bin", size: size, seed: 1)
        let shaB = try TestData.writeFile(at: fx.www + "/b/data.bin", size: size, seed: 2)
        func manifest(_ version: String, _ sha: String) throws {
            fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
            fx.manifest.add(path: "data.bin", size: size, sha256: sha, url: fx.server.url(version + "/data.bin"))
            try fx.writeManifest()
        }

        try manifest("a", shaA)
        let stopped = try fx.sync(flags + ["--deadline", "2s"])
        #expect(stopped.exitCode == 75, "\(stopped)")

        try manifest("b", shaB)
        let victim = try fx.startSync(flags)
        // About a megabyte of B, well before its first 8 MiB checkpoint: counted as the 4 KiB
        // blocks of the partial file that hold B's bytes (the file is A's partial at first, and
        // all its size at once when segmented).
        let partial = fx.destPath(".mirror/partial/" + PartialFile.name(for: "data.bin"))
        let bytesB = [UInt8](try Data(contentsOf: URL(fileURLWithPath: fx.www + "/b/data.bin")))
        func bytesOfB() -> Int {
            guard let held = FileManager.default.contents(atPath: partial) else { return 0 }
            let count = min(held.count, bytesB.count)
            return held.withUnsafeBytes { h in
                bytesB.withUnsafeBytes { b in
                    guard let h = h.baseAddress, let b = b.baseAddress else { return 0 }
                    return stride(from: 0, to: count, by: 4096).filter { memcmp(h + $0, b + $0, min(4096, count - $0)) == 0 }.count * 4096
                }
            }
        }
        try Wait.until("the partial file holds a megabyte of B or the run ended", timeout: 60) {
            bytesOfB() >= 1_000_000 || !victim.isRunning
        }
        victim.signal(SIGKILL)
        _ = try victim.wait(timeout: 10)

        try manifest("a", shaA)
        let result = try fx.sync(flags)
        if result.exitCode == 0 {
            #expect(try TestData.sha256(ofFileAt: fx.destPath("data.bin")) == shaA, "exit 0 must mean version A")
        }
        #expect(result.exitCode == 0, "\(result)")
        let verify = try Mirror.run(["verify", fx.manifestPath, "--dest", fx.dest], timeout: 60)
        #expect(verify.exitCode == 0, "\(verify)")
    }

    /// D7: `café.bin` spelled NFC and NFD are two files. A stopped run must resume each from its
    /// own partial, and compaction must keep both verified records.
    @Test func nfcAndNFDSpellingsAreTwoPaths() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "2m"))
        let nfc = "caf\u{E9}.bin"
        let nfd = "cafe\u{301}.bin"
        #expect(Array(nfc.utf8) != Array(nfd.utf8))
        let size: Int64 = 12 << 20
        let shaC = try TestData.writeFile(at: fx.www + "/nfc.bin", size: size, seed: 11)
        let shaD = try TestData.writeFile(at: fx.www + "/nfd.bin", size: size, seed: 12)
        fx.manifest.add(path: nfc, size: size, sha256: shaC, url: fx.server.url("nfc.bin"))
        fx.manifest.add(path: nfd, size: size, sha256: shaD, url: fx.server.url("nfd.bin"))
        try fx.writeManifest()

        // 2 MiB/s per connection, both at once: each has passed its 8 MiB checkpoint at 5 s.
        let stopped = try fx.sync(["--segments", "1", "--deadline", "5s"])
        #expect(stopped.exitCode == 75, "\(stopped)")
        let before = try fx.requestsSoFar().count
        let done = try fx.sync(["--segments", "1"])
        #expect(done.exitCode == 0, "\(done)")
        let resumed = try fx.requests(atLeast: before + 2).dropFirst(before)
        #expect(resumed.count == 2)
        for request in resumed {
            #expect(request.rangeHeader != nil, "each spelling resumes its own partial: \(request)")
        }
        #expect(try TestData.sha256(ofFileAt: fx.destPath(nfc)) == shaC)
        #expect(try TestData.sha256(ofFileAt: fx.destPath(nfd)) == shaD)

        // Many runs grow the journal past its compaction threshold; both records must survive.
        // (docs/journal.md: compaction once there are more than 1.5 × entries + 256 lines).
        for _ in 0..<270 { _ = try fx.sync(["--segments", "1"]) }
        let journal = try String(contentsOfFile: fx.dest + "/.mirror/journal", encoding: .utf8)
        let lines = journal.split(separator: "\n")
        #expect(lines.count < 100, "the journal was compacted: \(lines.count) lines")
        #expect(lines.filter { $0.contains(" verified ") }.count == 2, "\(journal)")
        let noop = try fx.sync(["--segments", "1"])
        #expect(noop.exitCode == 0, "\(noop)")
        #expect(try fx.requestsSoFar().count == before + 2, "no file was fetched again")
    }

    /// D9: a partial file whose entry left the manifest is removed, not kept for ever.
    @Test func orphanedPartialsAreRemoved() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "1m"))
        let shaA = try fx.addFile("gone.bin", size: 6 << 20, seed: 21)
        _ = shaA
        try fx.writeManifest()
        let stopped = try fx.sync(["--segments", "1", "--deadline", "2s"])
        #expect(stopped.exitCode == 75, "\(stopped)")
        let partials = fx.dest + "/.mirror/partial"
        #expect(try FileManager.default.contentsOfDirectory(atPath: partials).count == 1)

        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        try fx.addFile("kept.bin", size: 1000, seed: 22)
        try fx.writeManifest()
        let done = try fx.sync()
        #expect(done.exitCode == 0, "\(done)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: partials).isEmpty,
                "the partial of gone.bin is removed once no entry owns it")
    }
}
