import Foundation
import MirrorState
import Testing
import MirrorCore
import MirrorFS
import MirrorTestSupport

/// Segmented downloads (`--segments`): several ranges of one file at once, into one partial file,
/// each segment's durable progress journaled, and one stream again when a server will not play.
@Suite struct SegmentTests {
    static let mib: Int64 = 1 << 20

    /// The journal's segments for `path`, as the tool itself reads them.
    static func journaledSegments(_ fx: SyncFixture, _ path: String) throws -> [SegmentRecord]? {
        let fd = open(fx.destPath(".mirror"), O_RDONLY | O_DIRECTORY)
        guard fd >= 0 else { return nil }
        let journal = try Journal(folder: FileDescriptor(fd: fd, displayPath: ".mirror"), displayPath: "journal", readOnly: true)
        return journal.records(for: path)?.partial?.segments
    }

    /// SIGKILL while four rate-limited segments run; the rerun asks each segment for exactly the
    /// bytes the journal did not record as durable, with If-Range, and ends verified.
    @Test func aKilledSegmentedSyncResumesEverySegment() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "12m"))
        let size = 128 * Self.mib
        let sha = try fx.addFile("video.mp4", size: size, seed: 17)
        try fx.writeManifest()

        let victim = try fx.startSync(["--segments", "4"])
        try Wait.until("the journal records 48 MiB of video.mp4's segments or the run ended", timeout: 60) {
            let recorded = try Self.journaledSegments(fx, "video.mp4") ?? []
            return recorded.reduce(0, { $0 + $1.done }) >= 48 * Self.mib || !victim.isRunning
        }
        victim.signal(SIGKILL)
        _ = try victim.wait(timeout: 10)
        let recorded = try Self.journaledSegments(fx, "video.mp4") ?? []
        // 128 MiB in 16 segments of 8 MiB (four per connection), lowest first, four at a time once widened (the rate
        // limit leaves the hash waiting for bytes).
        try #require(recorded.count == 16, "the journal holds every segment: \(recorded)")
        #expect(recorded.filter { $0.done > 0 }.count >= 4, "several segments made durable progress: \(recorded)")
        #expect(recorded.contains { $0.done < $0.end - $0.start }, "the kill came before the end")
        #expect(!fx.exists(fx.destPath("video.mp4")))
        // nginx logs a request when it ends: the killed run's requests in flight are logged once
        // nginx notices the closed connections, which under load can be a while after the kill.
        // The marker request of requestsSoFar() is logged after them.
        let firstRun = try fx.requestsSoFar().count

        let rerun = try fx.sync(["--segments", "4"])
        #expect(rerun.exitCode == 0, "\(rerun)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("video.mp4")) == sha)
        let open = recorded.filter { $0.done < $0.end - $0.start }
        let resumed = try fx.requests(atLeast: firstRun + open.count).dropFirst(firstRun)
        #expect(Set(resumed.compactMap(\.rangeHeader)) == Set(open.map { "bytes=\($0.start + $0.done)-\($0.end - 1)" }),
                "each open segment resumes at its durable offset: \(resumed) vs \(recorded)")
        #expect(resumed.allSatisfy { $0.status == 206 && $0.ifRange != nil })
        let sent = resumed.reduce(0) { $0 + $1.bodyBytesSent }
        let missing = open.reduce(0) { $0 + ($1.end - $1.start - $1.done) }
        #expect(sent == missing, "the rerun fetched \(sent) bytes, the journal lacked \(missing)")
        print("measured: segmented kill with \(recorded.reduce(0) { $0 + $1.done }) bytes durable; rerun fetched \(sent) bytes of \(size)")
    }

    /// A file starts on one connection and widens while the hash waits for bytes: behind a
    /// per-connection rate limit that is at once, so the segments end up on four connections.
    /// (The opposite case, one stream that outruns the hash, depends on the machine's speed and
    /// is measured in `bench/` instead.)
    @Test func aRateLimitedFileWidensToEverySegment() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "12m"))
        let sha = try fx.addFile("video.mp4", size: 48 * Self.mib, seed: 21)
        try fx.writeManifest()
        let result = try fx.sync(["--segments", "4", "--segments-above", "1M"])
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("video.mp4")) == sha)
        let gets = try fx.requests(atLeast: 12)
        #expect(gets.count == 12 && gets.allSatisfy { $0.status == 206 }, "48 MiB in 4 MiB segments: \(gets)")
        #expect(Set(gets.map(\.connection)).count == 4, "four connections at most, and all four used: \(gets)")
        // One connection ran alone until the first decision, a quarter second after the first
        // request; with all four started at once this fails.
        let opened = Dictionary(grouping: gets, by: \.connection).values.compactMap { $0.map(\.started).min() }.sorted()
        try #require(opened.count >= 2)
        #expect(opened[1] - opened[0] >= 0.2, "the second connection came at once: \(opened)")
        #expect(gets.min { $0.started < $1.started }?.rangeHeader == "bytes=0-4194303")
    }

    /// An `Authorization` header from `--auth-header-env` and a segment's `If-Range` go out
    /// together (libcurl's header list is replaced, not merged, by each setting).
    @Test func segmentsWithAnAuthorizationHeaderKeepIfRange() throws {
        let fx = try SyncFixture()
        let sha = try fx.addFile("data.bin", size: 16 * Self.mib, seed: 8)
        try fx.writeManifest()
        let env = SyncFixture.loopbackOnly.merging(["MIRROR_TEST_SEGMENT_AUTH": "Bearer segment-test"]) { $1 }
        let result = try Mirror.run(
                              ["sync", fx.manifestPath, "--dest", fx.dest, "--segments", "4", "--segments-above", "1M",
                               "--auth-header-env", "MIRROR_TEST_SEGMENT_AUTH"],
                              environment: env, loopbackBypass: false, timeout: 300)
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("data.bin")) == sha)
        let gets = try fx.requests(atLeast: 4)
        try #require(gets.count == 4, "16 MiB in 4 MiB segments: \(gets)")
        let later = gets.filter { $0.rangeHeader != "bytes=0-4194303" }
        #expect(later.count == 3)
        #expect(later.allSatisfy { $0.ifRange != nil && $0.status == 206 }, "segments after the first carry If-Range: \(gets)")
    }

    /// nginx with ranges off (`max_ranges 0`) answers each segment with the whole file: the tool
    /// drops the segments and takes the file as one stream.
    @Test func aServerWithoutRangesGetsOneStream() throws {
        let fx = try SyncFixture(nginx: .init(maxRanges: 0))
        let sha = try fx.addFile("data.bin", size: 16 * Self.mib, seed: 4)
        try fx.writeManifest()
        let result = try fx.sync(["--segments", "4", "--segments-above", "1M"])
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("data.bin")) == sha)
        let gets = try fx.requests(atLeast: 2)
        #expect(gets.contains { $0.rangeHeader?.hasPrefix("bytes=0-") == true }, "segments were asked for: \(gets)")
        #expect(gets.last?.status == 200 && gets.last?.bodyBytesSent == 16 * Self.mib, "then one whole response: \(gets)")
        #expect(try Self.journaledSegments(fx, "data.bin") == nil)
    }

    /// Below the threshold, and with `--segments 1`, a file is one request.
    @Test func smallFilesAndSegmentsOneAreOneRequest() throws {
        let fx = try SyncFixture()
        try fx.addFile("small.bin", size: 3 * Self.mib, seed: 5)
        try fx.addFile("large.bin", size: 12 * Self.mib, seed: 6)
        try fx.writeManifest()
        let result = try fx.sync(["--segments", "1", "--segments-above", "1M"])
        #expect(result.exitCode == 0, "\(result)")
        let gets = try fx.requests(atLeast: 2)
        #expect(gets.count == 2 && gets.allSatisfy { $0.rangeHeader == nil && $0.status == 200 }, "\(gets)")
    }
}

/// Segments against the fault server: each misbehaviour ends verified, or in one stream.
@Suite struct SegmentFaultTests {
    static let mib = 1 << 20
    static let segmented = ["--segments", "4", "--segments-above", "1M"]

    @Test func segmentsThatDropEveryMebibyteEachResume() throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 8 * Self.mib, fault: .dropEvery(bytes: Int64(Self.mib)))
        let result = try fx.sync(Self.segmented)
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        let requests = fx.server.requests()
        #expect(requests.count >= 8, "each 2 MiB segment needed two requests: \(requests.count)")
        #expect(requests.allSatisfy { $0.rangeHeader != nil }, "no segment fell back to the whole file")
    }

    /// A server that ignores Range sends the whole file to every segment request; the tool stops
    /// the segments and fetches the file once.
    @Test func aServerIgnoringRangeEndsInOneStream() throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 8 * Self.mib, fault: .ignoreRange)
        let result = try fx.sync(Self.segmented)
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        let requests = fx.server.requests()
        let whole = requests.filter { $0.rangeHeader == nil }
        #expect(whole.count == 1, "one request without Range after the segments were refused: \(requests)")
    }

    @Test(arguments: [Fault.LieKind.wrongStart, .wrongTotal])
    func aLyingContentRangeOnASegmentEndsInOneStream(lie: Fault.LieKind) throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 8 * Self.mib, fault: .lieContentRange(lie))
        let result = try fx.sync(Self.segmented)
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        #expect(fx.server.requests().contains { $0.rangeHeader == nil && $0.status == 200 })
    }

    /// The file changes on the server between segment requests: the segments' validators differ,
    /// the tool starts over as one stream, and the manifest's checksum decides.
    @Test func aFileChangingUnderTheSegmentsIsFetchedAgainWhole() throws {
        let fx = try FaultFixture()
        let size = 8 * Self.mib
        let newer = TestData.bytes(count: size, seed: 99)
        fx.server.serve("/a.bin", bytes: TestData.bytes(count: size, seed: 98), fault: .changeAfter(requests: 2, to: newer))
        fx.manifest.add(path: "a.bin", size: Int64(size), sha256: TestData.sha256(of: newer))
        let result = try fx.sync(Self.segmented)
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: newer))
    }
}
