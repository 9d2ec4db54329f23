import Foundation
import Testing
import MirrorModel
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A large file of a Metalink 4 file with several mirrors, synced by the built binary from nginx
/// on loopback: its segments go to every mirror at once, each piece is checked against its
/// piece hash as it lands, a mirror that sends a wrong piece is dropped for the file, and a killed
/// run resumes each segment at its own mirror with that mirror's validator (docs/manifest.md,
/// "Metalink 4"; docs/journal.md, `srcs` and `segsrc`).
@Suite(.serialized) struct MetalinkMirrorTests {
    static let size = 24 << 20
    /// The file is over --segments-above, so it is fetched in segments (of 4 MiB at this size).
    static let segmented = ["--segments-above", "4M"]
    static let content = TestData.bytes(count: size, seed: 77)

    static func pieceHashes(_ kind: PieceHashes.Kind, length: Int) -> [String] {
        stride(from: 0, to: content.count, by: length).map { start in
            let hasher = PieceHasher(kind)!
            content[start..<min(content.count, start + length)].withUnsafeBytes { hasher.update($0) }
            return hasher.finish().map { String(format: "%02x", $0) }.joined()
        }
    }

    /// `image.iso` under each of `mirrors` (folders of www), `bad` ones with a byte changed at
    /// `flipAt` (and every `flipEvery` bytes after it); the Metalink file lists them in that
    /// order, with piece hashes of `kind`.
    static func publish(_ fx: SyncFixture, mirrors: [String], bad: Set<String>, flipAt: Int = 9 << 20 + 4321,
                        flipEvery: Int = size, kind: PieceHashes.Kind = .sha256) throws -> String {
        for mirror in mirrors {
            var bytes = content
            if bad.contains(mirror) { for offset in stride(from: flipAt, to: size, by: flipEvery) { bytes[offset] ^= 0x40 } }
            try FileManager.default.createDirectory(atPath: fx.www + "/" + mirror, withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: fx.www + "/\(mirror)/image.iso"))
        }
        let length = 1 << 20
        let urls = mirrors.enumerated().map { "<url priority=\"\($0.offset + 1)\">\(fx.server.baseURL)\($0.element)/image.iso</url>" }
        let pieces = pieceHashes(kind, length: length).map { "<hash>\($0)</hash>" }.joined()
        let meta4 = """
            <?xml version="1.0" encoding="UTF-8"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <file name="image.iso">
                <size>\(size)</size>
                <hash type="sha-256">\(TestData.sha256(of: content))</hash>
                <pieces length="\(length)" type="\(kind.rawValue)">\(pieces)</pieces>
                \(urls.joined(separator: "\n    "))
              </file>
            </metalink>

            """
        try Data(meta4.utf8).write(to: URL(fileURLWithPath: fx.www + "/set.meta4"))
        return fx.server.baseURL + "set.meta4"
    }

    static func fileRequests(_ log: [AccessLogEntry], _ mirror: String) -> [AccessLogEntry] {
        log.filter { $0.method == "GET" && $0.uri == "/\(mirror)/image.iso" }
    }

    @Test func segmentsComeFromEveryMirrorAndAWrongPieceDropsItsMirror() throws {
        let fx = try SyncFixture()
        // b holds another file of the same size: wherever its segments fall, their first piece is wrong.
        let url = try Self.publish(fx, mirrors: ["a", "b", "c"], bad: ["b"], flipAt: 4321, flipEvery: 1 << 20)
        let result = try Mirror.run(["sync", url, "--dest", fx.dest] + Self.segmented)
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("image.iso")) == TestData.sha256(of: Self.content))
        // The warning names the piece, its hash type and the mirror, once: b is not asked again.
        let warnings = result.stderr.components(separatedBy: "did not match its sha-256 hash (sent by \(fx.server.baseURL)b/image.iso)")
        #expect(warnings.count == 2, "\(result.stderr)")
        let log = try fx.server.settledAccessLog()
        for mirror in ["a", "b", "c"] {
            #expect(!Self.fileRequests(log, mirror).isEmpty, "segments from \(mirror): \(log)")
            #expect(Self.fileRequests(log, mirror).allSatisfy { $0.rangeHeader != nil }, "\(log)")
        }
        // The wrong piece cost its own segment, not the file: far less than a second copy came.
        let sent = log.filter { $0.uri.hasSuffix("image.iso") }.reduce(Int64(0)) { $0 + $1.bodyBytesSent }
        #expect(sent < Int64(Self.size) * 3 / 2, "sent \(sent) for \(Self.size)")
    }

    @Test func aWeakPieceHashStillPicksOutTheBadMirror() throws {
        let fx = try SyncFixture()
        let url = try Self.publish(fx, mirrors: ["a", "b"], bad: ["a"], flipAt: 100, kind: .sha1)
        // One stream (below --segments-above): the next mirror continues from the wrong piece.
        let result = try Mirror.run(["sync", url, "--dest", fx.dest])
        #expect(result.exitCode == 0, "\(result)")
        #expect(result.stderr.contains("piece 0 (bytes 0-1048575) did not match its sha-1 hash (sent by \(fx.server.baseURL)a/image.iso)"),
                "\(result.stderr)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("image.iso")) == TestData.sha256(of: Self.content))
    }

    @Test func whenEveryMirrorSendsAWrongPieceTheFileFailsAndNothingIsInstalled() throws {
        let fx = try SyncFixture()
        let url = try Self.publish(fx, mirrors: ["a", "b"], bad: ["a", "b"])
        let result = try Mirror.run(["sync", url, "--dest", fx.dest] + Self.segmented)
        #expect(result.exitCode == 1, "\(result)")
        #expect(result.stderr.contains("checksum mismatch (piece 9 (bytes 9437184-10485759) did not match its sha-256 hash)"), "\(result.stderr)")
        #expect(!fx.exists(fx.destPath("image.iso")))
    }

    @Test func aMirrorWithoutTheFileIsSetAsideWhileTheOthersCarryItOn() throws {
        let fx = try SyncFixture()
        let url = try Self.publish(fx, mirrors: ["a", "gone", "c"], bad: [])
        try FileManager.default.removeItem(atPath: fx.www + "/gone/image.iso")
        let result = try Mirror.run(["sync", url, "--dest", fx.dest] + Self.segmented)
        #expect(result.exitCode == 0, "\(result)")
        #expect(result.stderr.contains("gone/image.iso: server answered HTTP 404"), "\(result.stderr)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("image.iso")) == TestData.sha256(of: Self.content))
        let log = try fx.server.settledAccessLog()
        #expect(Self.fileRequests(log, "gone").count == 1, "asked once, then set aside: \(log)")
    }

    /// nginx's ETag for a file: hex modification time, hex size (ngx_http_core_module).
    static func etag(_ path: String) throws -> String {
        var st = stat()
        try #require(stat(path, &st) == 0)
        return "\"\(String(st.st_mtim.tv_sec, radix: 16))-\(String(st.st_size, radix: 16))\""
    }

    @Test func aKilledRunResumesEachSegmentAtItsMirrorWithThatMirrorsValidator() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "2m"))
        let url = try Self.publish(fx, mirrors: ["a", "b"], bad: [])
        // Different validators for the two copies of the same bytes.
        var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 0), timespec(tv_sec: 1_700_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, fx.www + "/b/image.iso", &times, 0) == 0)
        let tags = ["a": try Self.etag(fx.www + "/a/image.iso"), "b": try Self.etag(fx.www + "/b/image.iso")]
        #expect(tags["a"] != tags["b"])
        let run = try Mirror.start(["sync", url, "--dest", fx.dest] + Self.segmented, environment: ["MIRROR_TEST_CHECKPOINT_SECONDS": "0.5"])
        defer { run.signal(SIGKILL) }
        let journal = fx.dest + "/.mirror/journal"
        try Wait.until("a checkpoint records segments from both mirrors", timeout: 60, detail: (try? run.currentStderr()) ?? "") {
            let text = (try? String(contentsOfFile: journal, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").contains { $0.contains(" partial ") && $0.contains("segsrc=")
                && $0.contains("/a/image.iso") && $0.contains("/b/image.iso") } || !run.isRunning
        }
        run.signal(SIGKILL)
        _ = try run.wait(timeout: 30)
        let before = try fx.server.settledAccessLog().count
        let resumed = try Mirror.run(["sync", url, "--dest", fx.dest, "--json"] + Self.segmented)
        #expect(resumed.exitCode == 0, "\(resumed)")
        #expect(resumed.stdout.contains("\"resumed\""), "\(resumed.stdout)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("image.iso")) == TestData.sha256(of: Self.content))
        let after = try fx.server.settledAccessLog().dropFirst(before)
        for mirror in ["a", "b"] {
            let asked = Self.fileRequests(Array(after), mirror)
            #expect(!asked.isEmpty, "\(mirror) asked again: \(after)")
            // Each mirror is only ever sent its own validator.
            for request in asked { #expect(request.ifRange == nil || request.ifRange == tags[mirror], "\(request)") }
            #expect(asked.contains { $0.ifRange == tags[mirror] }, "a resumed segment at \(mirror) carries its validator: \(asked)")
        }
    }
    /// Kills at every few checkpoints of a file spread over three mirrors, one of them sending
    /// another file, through a capped link: each run resumes what the journal vouches for (each
    /// segment at its own mirror), a wrong piece is dropped again after every resume that meets
    /// it, and no run ever leaves a file at the path that is not the manifest's.
    @Test func killsAtCheckpointsNeverLeaveWrongBytes() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "3m"))
        let url = try Self.publish(fx, mirrors: ["a", "b", "c"], bad: ["c"], flipAt: 777, flipEvery: 1 << 20)
        let journal = fx.dest + "/.mirror/journal"
        func partialRecords() -> Int {
            let text = (try? String(contentsOfFile: journal, encoding: .utf8)) ?? ""
            return text.components(separatedBy: " partial ").count - 1
        }
        var kills = 0
        for round in 1...4 {
            let seen = partialRecords()
            let run = try Mirror.start(["sync", url, "--dest", fx.dest] + Self.segmented,
                                       environment: ["MIRROR_TEST_CHECKPOINT_SECONDS": "0.3"])
            defer { run.signal(SIGKILL) }
            try Wait.until("round \(round): two more checkpoints, or the end", timeout: 120, detail: (try? run.currentStderr()) ?? "") {
                partialRecords() >= seen + 2 || !run.isRunning
            }
            if run.isRunning { kills += 1 }
            run.signal(SIGKILL)
            _ = try run.wait(timeout: 30)
            if fx.exists(fx.destPath("image.iso")) {
                #expect(try TestData.sha256(ofFileAt: fx.destPath("image.iso")) == TestData.sha256(of: Self.content), "round \(round)")
            }
        }
        let last = try Mirror.run(["sync", url, "--dest", fx.dest] + Self.segmented)
        #expect(last.exitCode == 0, "\(last)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("image.iso")) == TestData.sha256(of: Self.content))
        #expect(kills >= 2, "the runs were killed mid-file \(kills) times")
    }
}
