import Foundation
import Testing
@testable import MirrorCore
@testable import MirrorFS
@testable import MirrorKit
import MirrorTestSupport

@Suite struct RunLogTests {
    /// A literal pattern, read only (`Regex` is not Sendable).
    nonisolated(unsafe) static let line = try! Regex(#"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z) (info|warning|failed|error) (.+)$"#)

    @Test func linesAreAppendedTimestampedAndWithoutCredentials() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-log")
        let path = dir.path("sync.log")
        try "an earlier line\n".write(toFile: path, atomically: false, encoding: .utf8)
        let log = try RunLog(path: path, clock: { 1_763_780_645.9 })
        #expect(log.write("info", "start sync https://alice:hunter2@example.org/m.yaml") == nil)
        #expect(log.write("failed", "a.bin: 503 from http://bob:pw@mirror.example/a.bin\nsecond line") == nil)
        log.close()
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!text.contains("hunter2") && !text.contains("alice") && !text.contains("bob:pw"))
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines[0] == "an earlier line", "appends, never truncates")
        for line in lines.dropFirst() {
            let match = try #require(line.wholeMatch(of: Self.line), "\(line)")
            #expect(match.output[1].substring == "2025-11-22T03:04:05Z")
        }
        #expect(lines[1].hasSuffix("info start sync https://***@example.org/m.yaml"))
        #expect(lines[2].hasSuffix("failed a.bin: 503 from http://***@mirror.example/a.bin second line"))
    }

    @Test func aMissingLogIsCreatedReadableByAll() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-log")
        let path = dir.path("new.log")
        let old = umask(0o077)
        defer { umask(old) }
        _ = try RunLog(path: path)
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o644)
        #expect(throws: SystemError.self) { _ = try RunLog(path: dir.path("no/such/folder.log")) }
    }

    @Test func urlsInsideTextAreMasked() {
        #expect(redactingURLs(in: "x https://u:p@h/a y (ftp://q@r/) z") == "x https://***@h/a y (ftp://***@r/) z")
        #expect(redactingURLs(in: "no url here") == "no url here")
        #expect(redactingURLs(in: "\"http://h/p@x\"") == "\"http://h/p@x\"")
    }

    @Test func rfc3339() {
        #expect(Formatting.rfc3339(0) == "1970-01-01T00:00:00Z")
    }

    @Test func jitterStaysBelowItsBoundAndTheBucketPaysItsDebt() {
        #expect(Jitter.draw(upTo: 0) == 0)
        for _ in 0..<200 {
            let d = Jitter.draw(upTo: 2)
            #expect(d >= 0 && d < 2)
        }
        let bucket = RateLimiter(bytesPerSecond: 1000, now: 0)
        #expect(!bucket.admit(10, now: 0), "an empty bucket admits nothing")
        #expect(bucket.admit(5000, now: 0.1), "any credit admits a whole piece, into debt")
        #expect(!bucket.admit(1, now: 4))
        // 4900 bytes of debt at 0.1 s, 3900 repaid by 4 s: 1 s to go.
        #expect(abs(bucket.wait(now: 4) - 1.001) < 0.0001)
        #expect(!bucket.admit(1, now: 4.99))
        #expect(bucket.admit(1, now: 5.01))
        #expect(bucket.wait(now: 100) == 0)
        #expect(bucket.admit(1, now: 100) && bucket.admit(499, now: 100) && !bucket.admit(1, now: 100), "credit is capped at half a second")
    }
}
