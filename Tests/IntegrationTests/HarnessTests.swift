#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorTestSupport
import Testing

/// Checks the test harness itself (`MirrorTestSupport`), so that an integration-test failure can be
/// blamed on `mirror` and not on the scaffolding. Every check compares real values: a harness that
/// did nothing would fail here.
@Suite struct HarnessTests {
    private static let keepingDirs = ProcessInfo.processInfo.environment["MIRROR_KEEP_TEST_DIRS"] == "1"

    private static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    // MARK: TemporaryDirectory

    @Test(.enabled(if: !keepingDirs, "MIRROR_KEEP_TEST_DIRS=1 keeps folders on purpose"))
    func temporaryDirectoryIsRemovedOnDeinit() throws {
        // A file outside, reached through a symlink inside: removal must not follow the link.
        let outside = try TemporaryDirectory(prefix: "mirror-harness-outside")
        try TestData.writeFile(at: outside.path("keep/me.bin"), size: 100, seed: 1)

        var removedPath = ""
        do {
            let dir = try TemporaryDirectory(prefix: "mirror-harness")
            removedPath = dir.path
            #expect(dir.path("x/y") == dir.path + "/x/y")
            var info = stat()
            #expect(stat(dir.path, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o700)

            try TestData.writeFile(at: dir.path("a/b/c.bin"), size: 4096, seed: 2)
            try TestData.writeFile(at: dir.path("ro/inner/file.bin"), size: 10, seed: 3)
            #expect(chmod(dir.path("ro/inner"), 0o500) == 0)
            #expect(chmod(dir.path("ro"), 0o500) == 0)
            #expect(symlink(outside.path("keep"), dir.path("link")) == 0)
            // A name that is not valid UTF-8.
            let oddName = Array(dir.path("odd-").utf8).map { CChar(bitPattern: $0) } + [CChar(bitPattern: 0xff), 0]
            let fd = open(oddName, O_WRONLY | O_CREAT, 0o600)
            #expect(fd >= 0)
            close(fd)
            #expect(Self.exists(dir.path("a/b/c.bin")))
        }
        #expect(!removedPath.isEmpty)
        #expect(!Self.exists(removedPath))
        #expect(Self.exists(outside.path("keep/me.bin")))
    }

    // MARK: ChildProcess

    @Test func childProcessCapturesOutputAndExitCode() throws {
        let result = try ChildProcess.run("/bin/sh", ["-c", "echo hi; echo err >&2; exit 3"], timeout: 30)
        #expect(result.stdout == "hi\n")
        #expect(result.stderr == "err\n")
        #expect(result.exitCode == 3)
        #expect(result.signal == nil)
        #expect(result.maxRSSKilobytes > 0)
    }

    @Test func childProcessUsesEnvironmentAndWorkingDirectory() throws {
        let dir = try TemporaryDirectory()
        let result = try ChildProcess.run("/bin/sh", ["-c", "pwd; echo \"$HARNESS_VALUE\"; test -n \"$PATH\" && echo inherited"],
                                          environment: ["HARNESS_VALUE": "a b"], cwd: dir.path, timeout: 30)
        #expect(result.stdout == "\(dir.path)\na b\ninherited\n")
        #expect(result.exitCode == 0)
    }

    @Test func childProcessLargeOutputDoesNotBlock() throws {
        let result = try ChildProcess.run("/bin/sh", ["-c", "head -c 5000000 /dev/zero; head -c 300000 /dev/zero >&2"], timeout: 60)
        #expect(result.exitCode == 0)
        #expect(result.stdout.utf8.count == 5_000_000)
        #expect(result.stderr.utf8.count == 300_000)
    }

    @Test func childProcessDoesNotInheritDescriptors() throws {
        let dir = try TemporaryDirectory()
        // Opened without O_CLOEXEC, as a careless test (or library) might.
        let fd = open(dir.path("held-open"), O_WRONLY | O_CREAT, 0o600)
        try #require(fd > 2)
        defer { close(fd) }
        let result = try ChildProcess.run("/bin/sh", ["-c", "if [ -e /proc/$$/fd/\(fd) ]; then echo leaked; else echo clean; fi"], timeout: 30)
        #expect(result.stdout == "clean\n")
    }

    @Test func childProcessReportsSignal() throws {
        let process = try ChildProcess("/bin/sleep", ["30"])
        #expect(process.isRunning)
        process.signal(SIGKILL)
        let result = try process.wait(timeout: 30)
        #expect(result.signal == SIGKILL)
        #expect(result.exitCode == 128 + SIGKILL)
    }

    @Test func childProcessRunTimesOut() throws {
        let error = try #require(throws: ProcessTimeoutError.self) {
            try ChildProcess.run("/bin/sh", ["-c", "echo about-to-sleep >&2; exec sleep 30"], timeout: 1)
        }
        // `sleep 30` finishing on its own would exit 0; SIGKILL proves the harness cut it short.
        #expect(error.result.signal == SIGKILL)
        #expect(error.timeout == 1)
        #expect(error.description.contains("timed out"))
    }

    @Test func childProcessTimeoutKillsTheWholeGroup() throws {
        let process = try ChildProcess("/bin/sh", ["-c", "sleep 30 & echo $!; echo waiting >&2; wait"])
        // Bounded wait for the shell to report its background child's pid.
        let grandchild = try Wait.for("the shell printed its background child's pid", timeout: 10) {
            try process.currentStdout().split(separator: "\n").first.flatMap { pid_t($0) }
        }
        try #require(grandchild > 0)
        let error = try #require(throws: ProcessTimeoutError.self) { try process.wait(timeout: 0.2) }
        #expect(error.result.signal == SIGKILL)
        #expect(error.description.contains("waiting"))  // the stderr tail is quoted
        // The background `sleep` was killed with the group: gone, or a zombie awaiting its reaper.
        try Wait.until("the background sleep \(grandchild) is gone or a zombie", timeout: 10) { Self.processIsGoneOrZombie(grandchild) }
    }

    private static func processIsGoneOrZombie(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
        // Format: "pid (comm) S ..."; comm may contain spaces, so look after the last ')'.
        guard let close = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    // MARK: TestData, ManifestBuilder, MirrorBinary

    @Test func testDataIsDeterministic() throws {
        let a = TestData.bytes(count: 1000, seed: 7)
        #expect(a.count == 1000)
        #expect(a == TestData.bytes(count: 1000, seed: 7))
        #expect(a != TestData.bytes(count: 1000, seed: 8))
        #expect(Array(a.prefix(13)) == TestData.bytes(count: 13, seed: 7))
        // SplitMix64 known answer: the first output for seed 0 is 0xE220A8397B1DCDAF (little-endian).
        #expect(TestData.bytes(count: 8, seed: 0) == [0xAF, 0xCD, 0x1D, 0x7B, 0x39, 0xA8, 0x20, 0xE2])
    }

    @Test func testDataFileChecksumMatchesSha256sum() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("nested/folder/data.bin")
        let size: Int64 = 3 * 1_048_576 + 5
        let sha = try TestData.writeFile(at: path, size: size, seed: 42)
        #expect(sha.count == 64)
        #expect(sha == sha.lowercased())

        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.size] as? NSNumber)?.int64Value == size)
        let sum = try ChildProcess.run("sha256sum", [path], timeout: 60)
        #expect(sum.exitCode == 0)
        #expect(sum.stdout.split(separator: " ").first.map(String.init) == sha)
        #expect(try TestData.sha256(ofFileAt: path) == sha)

        let head = try #require(FileHandle(forReadingAtPath: path)).readData(ofLength: 4096)
        #expect(Array(head) == TestData.bytes(count: 4096, seed: 42))
        #expect(try TestData.writeFile(at: path, size: size, seed: 42) == sha)
        #expect(try TestData.writeFile(at: dir.path("empty"), size: 0, seed: 42)
            == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func manifestBuilderQuotesAndEscapes() throws {
        var builder = ManifestBuilder(baseURL: "http://127.0.0.1:8080/")
        builder.add(path: "a/b.bin", size: 123, sha256: "abc")
        builder.add(path: "we\"ird\\ name\t\u{1}é.bin", size: 0, sha256: "def", url: "http://127.0.0.1:1/x?y=1#z",
                    extra: ["mode": ManifestBuilder.quoted("0644"), "mtime": "2026-11-01T12:00:00Z"])
        #expect(builder.yaml == """
            version: 1
            base_url: "http://127.0.0.1:8080/"
            files:
              - path: "a/b.bin"
                size: 123
                sha256: abc
              - path: "we\\"ird\\\\ name\\x09\\x01é.bin"
                url: "http://127.0.0.1:1/x?y=1#z"
                size: 0
                sha256: def
                mode: "0644"
                mtime: 2026-11-01T12:00:00Z

            """)
        let dir = try TemporaryDirectory()
        try builder.write(to: dir.path("m.yaml"))
        #expect(try String(contentsOfFile: dir.path("m.yaml"), encoding: .utf8) == builder.yaml)
        #expect(ManifestBuilder(baseURL: nil).yaml == "version: 1\nfiles: []\n")
    }

    @Test func mirrorBinaryIsFound() throws {
        let path = try MirrorBinary.path()
        #expect(path.hasSuffix("/mirror"))
        #expect(access(path, X_OK) == 0)
    }

    // MARK: NginxServer

    @Suite(.serialized) struct Nginx {
        static let size = 100_000
        static let seed: UInt64 = 5
        /// The served file's checksum. Bodies are compared by size and checksum, not byte arrays,
        /// so a mismatch prints two short lines instead of 100,000 numbers.
        static let sha = TestData.sha256(of: TestData.bytes(count: size, seed: seed))

        /// A document root (a 0700 mkdtemp folder) holding `data/f.bin`.
        private func makeRoot() throws -> TemporaryDirectory {
            let root = try TemporaryDirectory(prefix: "mirror-harness-root")
            try TestData.writeFile(at: root.path("data/f.bin"), size: Int64(Self.size), seed: Self.seed)
            return root
        }

        @Test func servesAFileFromAPrivateFolder() throws {
            let root = try makeRoot()
            var info = stat()
            #expect(stat(root.path, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o700)

            let server = try NginxServer(root: root.path)
            #expect(server.baseURL == "http://127.0.0.1:\(server.port)/")
            #expect(server.url("data/f.bin") == "http://127.0.0.1:\(server.port)/data/f.bin")
            #expect(server.url("/data/f.bin") == server.url("data/f.bin"))

            let response = try Loopback.httpGet(port: server.port, path: "/data/f.bin")
            #expect(response.status == 200)
            #expect(response.headers["content-length"] == "\(Self.size)")
            #expect(response.headers["etag"] != nil)
            #expect(response.body.count == Self.size)
            #expect(TestData.sha256(of: response.body) == Self.sha)
            #expect(try Loopback.httpGet(port: server.port, path: "/data/missing.bin").status == 404)
        }

        @Test func honoursRange() throws {
            let root = try makeRoot()
            let server = try NginxServer(root: root.path)
            let response = try Loopback.httpGet(port: server.port, path: "/data/f.bin", headers: ["Range": "bytes=10-19"])
            #expect(response.status == 206)
            #expect(response.headers["content-range"] == "bytes 10-19/\(Self.size)")
            #expect(response.body == Array(TestData.bytes(count: 20, seed: Self.seed)[10..<20]))
        }

        @Test func maxRangesZeroIgnoresRange() throws {
            let root = try makeRoot()
            let server = try NginxServer(root: root.path, options: .init(maxRanges: 0))
            let response = try Loopback.httpGet(port: server.port, path: "/data/f.bin", headers: ["Range": "bytes=10-19"])
            #expect(response.status == 200)
            #expect(response.headers["content-range"] == nil)
            #expect(response.body.count == Self.size)
            #expect(TestData.sha256(of: response.body) == Self.sha)
        }

        @Test func limitRateServesTheSameBytes() throws {
            let root = try makeRoot()
            let server = try NginxServer(root: root.path, options: .init(limitRate: "10m"))
            let response = try Loopback.httpGet(port: server.port, path: "/data/f.bin")
            #expect(response.status == 200)
            #expect(response.body.count == Self.size)
            #expect(TestData.sha256(of: response.body) == Self.sha)
        }

        @Test func accessLogRecordsRequests() throws {
            let root = try makeRoot()
            let server = try NginxServer(root: root.path)
            #expect(try server.accessLog().isEmpty)  // the readiness probe is not logged

            let full = try Loopback.httpGet(port: server.port, path: "/data/f.bin")
            let etag = try #require(full.headers["etag"])
            _ = try Loopback.httpGet(port: server.port, path: "/data/f.bin?x=1",
                                     headers: ["Range": "bytes=10-19", "If-Range": etag])
            _ = try Loopback.httpGet(port: server.port, path: "/data/missing.bin")

            let log = try server.accessLog()
            try #require(log.count == 3)
            #expect(log[0].method == "GET")
            #expect(log[0].uri == "/data/f.bin")
            #expect(log[0].status == 200)
            #expect(log[0].bodyBytesSent == Int64(Self.size))
            #expect(log[0].rangeHeader == nil)
            #expect(log[0].ifRange == nil)

            #expect(log[1].uri == "/data/f.bin")
            #expect(log[1].requestURI == "/data/f.bin?x=1")
            #expect(log[1].status == 206)
            #expect(log[1].bodyBytesSent == 10)
            #expect(log[1].rangeHeader == "bytes=10-19")
            #expect(log[1].ifRange == etag)
            #expect(log[1].connection != log[0].connection)  // HTTP/1.0: one connection per request

            #expect(log[2].status == 404)
            #expect(log[2].uri == "/data/missing.bin")
        }

        @Test func configErrorIsReportedWithTheErrorLog() throws {
            let root = try makeRoot()
            let error = try #require(throws: HarnessError.self) {
                _ = try NginxServer(root: root.path, options: .init(extraServerConfig: "no_such_directive on;"))
            }
            #expect(error.description.contains("unknown directive \"no_such_directive\""))
        }

        @Test func stopEndsTheServer() throws {
            let root = try makeRoot()
            let server = try NginxServer(root: root.path)
            #expect(server.isRunning)
            server.stop()
            #expect(!server.isRunning)
            server.stop()  // idempotent
            // Normally "connection refused"; if another test's server took the port meanwhile, it is
            // at least not ours any more.
            if let response = try? Loopback.httpGet(port: server.port, path: "/data/f.bin", timeout: 2) {
                #expect(TestData.sha256(of: response.body) != Self.sha)
            }
        }
    }
}
