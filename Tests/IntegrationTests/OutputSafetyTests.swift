import Foundation
import MirrorState
import Testing
import MirrorCore
import MirrorKit
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// What `mirror` writes for people and machines never carries a secret or a terminal control
/// (SECURITY.md): a password in a manifest URL stays out of every output and every file, whatever
/// characters it holds; `--log-file` refuses a link or FIFO planted by another user; file names
/// and journal text reach the terminal escaped.
@Suite(.serialized) struct OutputSafetyTests {
    /// Characters a user-info may hold (RFC 3986 §3.2.1) that once ended a URL early, plus `@`,
    /// `:` and a percent-encoded space. The password is `Zq7<c>Vw9`: neither half may appear anywhere.
    static let passwordCharacters = [")", "'", "\"", "@", ":", "%20"]
    static let markers = ["Zq7", "Vw9"]

    struct Outputs {
        var texts: [(String, String)] = []
        mutating func add(_ name: String, _ run: ProcessResult) {
            texts.append(("\(name) stdout", run.stdout))
            texts.append(("\(name) stderr", run.stderr))
        }
        /// Every regular file under `root` (the destination with its `.mirror`, the log, the metrics).
        mutating func addFiles(under root: String) {
            guard let walker = FileManager.default.enumerator(atPath: root) else { return }
            for case let relative as String in walker {
                let path = root + "/" + relative
                var st = stat()
                guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG,
                      let data = FileManager.default.contents(atPath: path) else { continue }
                texts.append((path, String(decoding: data, as: UTF8.self)))
            }
        }
        func leaks() -> [String] {
            texts.compactMap { name, text in
                OutputSafetyTests.markers.contains(where: text.contains) ? "\(name): \(text.debugDescription)" : nil
            }
        }
    }

    /// A remote manifest whose URL holds the password (then the metrics label and the log's
    /// "start sync" and "manifest … fetched" lines name it), then a local manifest whose `base_url`
    /// does (then each file's source, failures, the journal and `mirror status` do), then a
    /// manifest URL nobody answers (the error path). Text, `--json`, `--log-file`,
    /// `--metrics-file`, every file under DEST, `status` and `status --json`: no half of the
    /// password anywhere, and the runs did name the masked URL, so the check has seen it in play.
    @Test(arguments: passwordCharacters)
    func aPasswordInAManifestURLReachesNoOutputAndNoFile(_ character: String) throws {
        let password = "Zq7" + character + "Vw9"
        let fx = try SyncFixture()
        try fx.addFile("good.bin", size: 20_000, seed: 11)
        fx.manifest.add(path: "gone.bin", size: 10, sha256: String(repeating: "0", count: 64))
        let served = fx.www + "/remote.yaml"
        try fx.manifest.write(to: served)
        let withPassword = fx.server.baseURL.replacingOccurrences(of: "http://", with: "http://reader:\(password)@")
        let masked = fx.server.baseURL.replacingOccurrences(of: "http://", with: "http://***@")
        let log = fx.dir.path("out/sync.log"), metrics = fx.dir.path("out/mirror.prom")
        try FileManager.default.createDirectory(atPath: fx.dir.path("out"), withIntermediateDirectories: true)
        let reports = ["--log-file", log, "--metrics-file", metrics, "--retries", "0"]
        var outputs = Outputs()
        func sync(_ manifest: String, _ extra: [String]) throws -> ProcessResult {
            try Mirror.run(["sync", manifest, "--dest", fx.dest] + reports + extra, timeout: 60)
        }

        // 1. The manifest's own URL holds the password.
        let remote = withPassword + "remote.yaml"
        for (name, extra) in [("remote text", [String]()), ("remote json", ["--json"])] {
            let run = try sync(remote, extra)
            #expect([1, 65, 75].contains(run.exitCode), "\(name): \(run)")
            outputs.add(name, run)
        }
        let remoteMetrics = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(remoteMetrics.contains("manifest=\"\(masked)remote.yaml\""), "\(remoteMetrics)")

        // 2. The manifest's base_url holds it: every source and failure names it.
        fx.manifest.baseURL = withPassword
        try fx.writeManifest()
        for (name, extra) in [("local text", [String]()), ("local json", ["--json"])] {
            let run = try sync(fx.manifestPath, extra)
            #expect([0, 1].contains(run.exitCode), "\(name): \(run)")
            outputs.add(name, run)
        }
        for extra in [[String](), ["--json"]] {
            let status = try Mirror.run(["status", fx.manifestPath, "--dest", fx.dest] + extra, timeout: 60)
            outputs.add("status \(extra)", status)
        }

        // 3. Nobody answers at the manifest URL: the error names it, in every channel.
        let closed = try Loopback.freePort()
        let unreachable = "http://reader:\(password)@127.0.0.1:\(closed)/m.yaml"
        for (name, extra) in [("unreachable text", [String]()), ("unreachable json", ["--json"])] {
            let run = try Mirror.run(["sync", unreachable, "--dest", fx.dir.path("other")] + reports + extra, timeout: 60)
            #expect(run.exitCode == 75, "\(name): \(run)")
            outputs.add(name, run)
        }

        outputs.addFiles(under: fx.dest)
        outputs.addFiles(under: fx.dir.path("other"))
        outputs.addFiles(under: fx.dir.path("out"))
        #expect(outputs.leaks().isEmpty, "the password leaked:\n\(outputs.leaks().joined(separator: "\n"))")

        // The URLs were there, masked.
        let logText = try String(contentsOfFile: log, encoding: .utf8)
        #expect(logText.contains("start sync \(masked)remote.yaml"), "\(logText)")
        #expect(logText.contains("start sync http://***@127.0.0.1:\(closed)/m.yaml"), "\(logText)")
        #expect(outputs.texts.contains { $0.0.hasSuffix("/.mirror/journal") }, "the journal was checked")
    }

    // MARK: - --log-file planted by another user

    static let isRoot = geteuid() == 0

    /// Runs `command` as `nobody` (uid/gid 65534, no groups): the other local user of SECURITY.md.
    static func asNobody(_ command: [String]) throws {
        let run = try ChildProcess.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--"] + command,
                                       timeout: 10)
        #expect(run.exitCode == 0, "as nobody: \(command): \(run)")
    }

    /// In a folder anyone may write (mode 1777, like /tmp), `nobody` plants a symbolic link to a
    /// root-owned file and a FIFO with no reader at the names root's cron job passes to
    /// `--log-file`. Each run still syncs, says why it has no log, and ends in time; the linked
    /// file is untouched. (Before: the link was followed and the FIFO blocked the run for good.)
    @Test(.enabled(if: OutputSafetyTests.isRoot, "needs root, to plant the names as another user (nobody)"))
    func aLogFilePlantedByAnotherUserIsNeitherFollowedNorWaitedOn() throws {
        let fx = try SyncFixture()
        try fx.addFile("x.bin", size: 1000, seed: 21)
        try fx.writeManifest()
        #expect(chmod(fx.dir.path, 0o755) == 0)
        let shared = fx.dir.path("shared")
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
        #expect(chmod(shared, 0o1777) == 0)
        let victim = fx.dir.path("victim")
        try "precious\n".write(toFile: victim, atomically: false, encoding: .utf8)
        try Self.asNobody(["ln", "-s", victim, shared + "/link.log"])
        try Self.asNobody(["mkfifo", shared + "/fifo.log"])

        for name in ["link.log", "fifo.log"] {
            let run: ProcessResult
            do {
                run = try fx.sync(["--log-file", shared + "/" + name], timeout: 20)
            } catch let timeout as ProcessTimeoutError {
                Issue.record("--log-file \(name): the run hung: \(timeout)")
                continue
            }
            #expect(run.exitCode == 0, "\(name): \(run)")
            #expect(run.stderr.contains("cannot use the log file \(shared)/\(name)"), "\(name): \(run.stderr)")
            #expect(run.stderr.contains("the run goes on without it"), "\(name): \(run.stderr)")
        }
        #expect(fx.exists(fx.destPath("x.bin")))
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious\n", "the link was followed")
    }

    // MARK: - Terminal controls

    /// What a hostile text may hold: an OSC window title ended by BEL, "clear screen", an 8-bit CSI
    /// (U+009B), a right-to-left override.
    static let hostile = "\u{1B}]0;owned\u{07}\u{1B}[2J\u{9B}31m\u{202E}txt.exe"

    static func rawControls(in text: String) -> [String] {
        text.unicodeScalars.filter { Formatting.needsEscapeForTest($0) && $0 != "\n" }.map { String(format: "U+%04X", $0.value) }
    }

    /// A journal record planted in DEST/.mirror/journal (by anyone who can write there) carries
    /// escape sequences in its `error=`: `mirror status` prints them escaped, and its `--json` as
    /// JSON escapes.
    @Test func aJournalRecordCannotDriveTheTerminalThroughStatus() throws {
        let fx = try SyncFixture()
        try fx.addFile("good.bin", size: 1000, seed: 31)
        let zero = String(repeating: "0", count: 64)
        fx.manifest.add(path: "gone.bin", size: 10, sha256: zero)
        try fx.writeManifest()
        let first = try fx.sync(["--retries", "0"])
        #expect(first.exitCode == 1, "\(first)")
        let planted = JournalRecord.failed(FailedRecord(identity: EntryIdentity(path: "gone.bin", size: 10, digests: [.sha256: zero]),
                                                        error: Self.hostile, time: 1_800_000_000))
        let journal = try #require(FileHandle(forWritingAtPath: fx.destPath(".mirror/journal")))
        journal.seekToEndOfFile()
        journal.write(Data(planted.encodedLine()))
        journal.closeFile()

        let text = try Mirror.run(["status", fx.manifestPath, "--dest", fx.dest], timeout: 60)
        #expect(text.exitCode == 0, "\(text)")
        #expect(text.stdout.contains("failed      gone.bin: \\x1b]0;owned\\x07\\x1b[2J\\u{9B}31m\\u{202E}txt.exe"),
                "the planted record is shown, escaped: \(text.stdout.debugDescription)")
        #expect(Self.rawControls(in: text.stdout + text.stderr).isEmpty, "\(text.stdout.debugDescription)")

        let json = try Mirror.run(["status", fx.manifestPath, "--dest", fx.dest, "--json"], timeout: 60)
        #expect(Self.rawControls(in: json.stdout + json.stderr).isEmpty, "\(json.stdout.debugDescription)")
        let object = try #require(FaultFixture.json(json), "\(json.stdout)")
        let entries = try #require(object["entries"] as? [[String: Any]])
        #expect(entries.first?["error"] as? String == Self.hostile, "JSON carries the text itself, escaped only by JSON")
    }

    /// A destination whose name holds terminal controls is echoed by every `--json` document
    /// (`destination` of status and verify, the `reason` of a sync that cannot create it), escaped
    /// as JSON `\\uXXXX` and never raw, and each parses back to the name itself.
    @Test func aHostileDestinationNameIsEscapedInEveryJSONDocument() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 100, seed: 32)
        try fx.writeManifest()
        let blocker = fx.dir.path("file\(Self.hostile)")
        try Data("not a folder".utf8).write(to: URL(fileURLWithPath: blocker))
        let dest = blocker + "/dest"

        let sync = try Mirror.run(["sync", fx.manifestPath, "--dest", dest, "--json"], timeout: 60)
        #expect(sync.exitCode != 0, "\(sync)")
        #expect(Self.rawControls(in: sync.stdout).isEmpty, "\(sync.stdout.debugDescription)")
        let syncObject = try #require(FaultFixture.json(sync), "\(sync.stdout)")
        #expect((syncObject["reason"] as? String)?.contains(Self.hostile) == true, "\(sync.stdout.debugDescription)")
        #expect(sync.stdout.contains("\\u009b31m\\u202etxt.exe"), "\(sync.stdout.debugDescription)")

        let absent = fx.dir.path("absent\(Self.hostile)")  // status and verify need a DEST they can read, or none
        for command in ["status", "verify"] {
            let run = try Mirror.run([command, fx.manifestPath, "--dest", absent, "--json"], timeout: 60)
            #expect(Self.rawControls(in: run.stdout).isEmpty, "\(command): \(run.stdout.debugDescription)")
            let object = try #require(FaultFixture.json(run), "\(command): \(run)")
            #expect(object["destination"] as? String == absent, "\(command): \(run.stdout.debugDescription)")
        }
    }

    /// `mirror manifest create` over a tree with hostile names: the "skipped" notes name them
    /// escaped, invalid UTF-8 bytes included.
    @Test func hostileFileNamesAreEscapedWhenReported() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-names")
        let tree = dir.path("tree")
        try TestData.writeFile(at: tree + "/ok.bin", size: 10, seed: 41)
        try TestData.writeFile(at: tree + "/evil\u{1B}[2J\u{9B}31m.bin", size: 10, seed: 42)
        let latin1 = (Array((tree + "/caf").utf8) + [0xE9, 0x1B, 0x5B, 0x48, 0]).map { CChar(bitPattern: $0) }
        let fd = latin1.withUnsafeBufferPointer { open($0.baseAddress!, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644) }
        #expect(fd >= 0)
        close(fd)
        let run = try Mirror.run(["manifest", "create", tree, "--base-url", "http://127.0.0.1/x/"],
                           timeout: 60)
        #expect(run.exitCode == 0, "\(run)")
        #expect(run.stderr.contains("skipped evil\\x1b[2J\\u{9B}31m.bin: the name holds a control character"), "\(run.stderr.debugDescription)")
        #expect(run.stderr.contains("skipped caf\\xe9\\x1b[H: the name is not valid UTF-8"), "\(run.stderr.debugDescription)")
        #expect(Self.rawControls(in: run.stderr + run.stdout).isEmpty, "\(run.stderr.debugDescription)")
    }
}

extension Formatting {
    /// What the tests call a raw control: C0 (but the line feeds between lines), DEL, C1, and the
    /// bidirectional overrides. Spelled out here rather than calling MirrorCore, which is under test.
    static func needsEscapeForTest(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1f, 0x7f...0x9f, 0x202a...0x202e, 0x2066...0x2069: return true
        default: return false
        }
    }
}
