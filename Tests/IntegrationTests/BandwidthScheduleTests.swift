import Foundation
import Testing
import MirrorCore
import MirrorKit
import MirrorTestSupport

/// `--limit-rate` as a timetable (docs/cli.md, "Bandwidth schedule"), against nginx: a run that
/// crosses a boundary changes its cap in flight, in the same request. The local time is the
/// test's (`MIRROR_TEST_LOCAL_TIME_FILE`, ``LocalClock``), so the test moves it past the boundary
/// when the transfer is under way instead of waiting for the wall clock.
@Suite(.serialized) struct BandwidthScheduleTests {
    static let size: Int64 = 8 << 20

    /// Bytes in DEST/.mirror/partial so far (the file being downloaded).
    static func partialBytes(_ fx: SyncFixture) -> Int64 {
        let folder = fx.dest + "/.mirror/partial"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return names.reduce(0) { $0 + max(0, fx.size(of: folder + "/" + $1)) }
    }

    /// At 16 KiB/s until Monday 14:00, then no cap: 8 MiB held to 16 KiB/s would take 512 s, so a
    /// run that ends within the test's minute lifted the cap at the boundary; nginx logs one
    /// whole 200 answer, so the transfer was never restarted for it.
    @Test func crossingABoundaryLiftsTheCapWithoutRestartingTheTransfer() throws {
        let fx = try SyncFixture()
        let sha = try fx.addFile("big.bin", size: Self.size, seed: 91)
        try fx.writeManifest()
        let clock = fx.dir.path("local-time")
        try "Mon-13:59\n".write(toFile: clock, atomically: true, encoding: .utf8)

        let started = monotonicSeconds()
        let run = try Mirror.start(["sync", fx.manifestPath, "--dest", fx.dest, "--jobs", "1",
                                    "--limit-rate", "Mon-00:00,16K Mon-14:00,off"],
                                   environment: ["MIRROR_TEST_LOCAL_TIME_FILE": clock])
        try Wait.until("the capped download has written bytes, or the run ended", timeout: 60) {
            Self.partialBytes(fx) >= 32 << 10 || !run.isRunning
        }
        let before = Self.partialBytes(fx)
        let flipped = monotonicSeconds()
        let early = (try? run.currentStderr()) ?? ""
        #expect(run.isRunning, "the run ended before the boundary: \(early)")
        #expect(before < Self.size, "the cap before 14:00 held the file back")

        try "Mon-14:00\n".write(toFile: clock, atomically: true, encoding: .utf8)
        let result = try run.wait(timeout: 60)
        let ended = monotonicSeconds()
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("big.bin")) == sha)

        let requests = try fx.requests(atLeast: 1).filter { $0.uri == "/big.bin" }
        #expect(requests.count == 1, "one request for the file: \(requests)")
        #expect(requests.first?.status == 200 && requests.first?.rangeHeader == nil, "\(requests)")
        #expect(requests.first?.bodyBytesSent == Self.size, "\(requests)")
        let rateBefore = Double(before) / (flipped - started) / 1024
        let rateAfter = Double(Self.size - before) / max(ended - flipped, 0.001) / 1024
        print("measured: \(before) bytes in \(flipped - started) s before 14:00 (\(Int(rateBefore)) KiB/s, 16K asked); "
              + "\(Self.size - before) bytes in \(ended - flipped) s after (\(Int(rateAfter)) KiB/s, off)")
    }

    /// A wrong timetable entry is a usage error naming the entry and the form expected, before
    /// any request.
    @Test func aWrongEntryIsAUsageErrorNamingIt() throws {
        let fx = try SyncFixture()
        try fx.addFile("x.bin", size: 1000, seed: 92)
        try fx.writeManifest()
        let cases = [("08:00,2M 8:00,1M", #"entry 2 of the timetable, "8:00,1M": "8:00" is not a time; use HH:MM"#),
                     ("Mon-08:00,2M Funday-09:00,off", #"entry 2 of the timetable, "Funday-09:00,off": "Funday" is not a day"#),
                     ("08:00,2M 18:00,lots", #""lots" is not a rate"#)]
        for (value, expected) in cases {
            let result = try fx.sync(["--limit-rate", value])
            #expect(result.exitCode == 64, "\(value): \(result)")
            #expect(result.stderr.contains(expected), "\(value): \(result.stderr)")
        }
        #expect(try fx.requestsSoFar().isEmpty, "usage errors send no request")
    }
}
