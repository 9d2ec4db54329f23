import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// A lab's day after the first sync, as its admin meets it, in one cycle against a real nginx: publish, sync, republish in
/// place, rename, server down, disk full, network loss. At each step: the exit code, `--json`, the
/// metrics file and `status` (of the manifest's URL, read from the kept copy without the network).
///
/// DEST is on a tmpfs of 8 MiB mounted for the test (`mount -t tmpfs -o size=8m`), so that the
/// disk really fills (then grown to 32 MiB, as an admin makes room); where nothing can be mounted (not root, no `mount`) the disk-full step is
/// skipped with a printed message and the rest runs in a plain folder. The tmpfs is always
/// unmounted. Each step prints what it saw (`day2 …`), for the record.
@Suite(.serialized) struct DayTwoScenarioTests {
    @Test func publishSyncRepublishRenameServerDownDiskFullNetworkLoss() throws {
        let world = try DayTwo()
        defer { world.unmount() }

        // 1. Publish and sync: the manifest is fetched; the machine is in sync.
        try world.publish(["a.bin": (200_000, 1), "b.bin": (300_000, 2)])
        var step = try world.sync("publish")
        #expect(step.run.exitCode == 0, "\(step.run)")
        #expect(step.json["result"] as? String == "ok")
        #expect(step.manifest["source"] as? String == "fetched")
        let firstDigest = step.manifest["sha256"] as? String
        #expect(firstDigest == TestData.sha256(of: Array(try world.manifestBytes())))
        #expect(step.lastSuccessUnix != nil)
        #expect(step.metric("mirror_last_run_success") == 1)
        #expect(step.metric("mirror_manifest_source", [#"source="fetched""#]) == 1)
        #expect(step.metric("mirror_last_success_timestamp_seconds") != nil)
        var status = try world.status()
        #expect(status.text.contains("done             2"), "\(status.text)")
        #expect(status.text.contains("manifest: saved copy, current as of "), "\(status.text)")

        // 2. Republish in place: b.bin changes on the server, same URL; a rerun fetches the new
        // manifest and replaces b.bin; a run after it is told 304 (not modified).
        // nginx's validators are the file's mtime in whole seconds and its size: a manifest of the
        // same size rewritten within the same second would be answered 304. A person republishes
        // later than that; the test stamps the new manifest with another second.
        let previous = try #require(FileClock.times(of: world.www + "/manifest.yaml")).modified
        try world.publish(["a.bin": (200_000, 1), "b.bin": (300_000, 3)])
        try FileClock.giveNewValidators(world.www + "/manifest.yaml", previous: previous)
        step = try world.sync("republish")
        #expect(step.run.exitCode == 0, "\(step.run)")
        #expect(step.files["replaced"] as? Int == 1, "\(step.run.stdout)")
        #expect(step.manifest["source"] as? String == "fetched")
        #expect(step.manifest["sha256"] as? String != firstDigest)
        step = try world.sync("unchanged")
        #expect(step.manifest["source"] as? String == "not_modified", "\(step.run.stdout)")
        #expect(step.metric("mirror_manifest_source", [#"source="not_modified""#]) == 1)

        // 3. Rename: a.bin becomes docs/a-renamed.bin; the new path is fetched, the old file is
        // left alone (files the manifest does not name are never touched).
        try world.publish(["docs/a-renamed.bin": (200_000, 1), "b.bin": (300_000, 3)])
        step = try world.sync("rename")
        #expect(step.run.exitCode == 0, "\(step.run)")
        #expect((step.json["changed"] as? [[String: Any]])?.first?["path"] as? String == "docs/a-renamed.bin")
        #expect(FileManager.default.fileExists(atPath: world.dest + "/a.bin"))

        // 4. Server down: the run syncs from the saved copy, ends ok (exit 0), and says so on
        // standard error once; the next run says it only in --json, metrics and status.
        world.server.stop()
        step = try world.sync("server down")
        #expect(step.run.exitCode == 0, "\(step.run)")
        #expect(step.json["result"] as? String == "ok")
        #expect(step.manifest["source"] as? String == "saved_copy")
        #expect((step.manifest["age_seconds"] as? Int).map { $0 >= 0 } == true)
        #expect(step.run.stderr.contains("using the last good copy"), "\(step.run.stderr)")
        #expect(step.run.stderr.contains("said here at most once a day"), "\(step.run.stderr)")
        #expect(step.metric("mirror_manifest_source", [#"source="saved_copy""#]) == 1)
        #expect(step.metric("mirror_manifest_age_seconds").map { $0 >= 0 } == true)
        step = try world.sync("server still down")
        #expect(step.run.exitCode == 0, "\(step.run)")
        #expect(step.run.stderr.isEmpty, "said at most once a day: \(step.run.stderr)")
        #expect(step.manifest["source"] as? String == "saved_copy")
        status = try world.status()
        #expect(status.run.exitCode == 0, "\(status.run)")
        #expect(status.text.contains("; manifest: saved copy"), "\(status.text)")
        #expect(status.text.contains("last success: "), "\(status.text)")
        let verify = try world.mirror(["verify", world.manifestURL, "--dest", world.dest])
        print("day2 verify (server down): exit \(verify.exitCode): \(verify.stdout.trimmingCharacters(in: .whitespacesAndNewlines))")
        #expect(verify.exitCode == 0, "\(verify)")
        try world.server.restart()

        // 5. Disk full: a file larger than the free space. The space check stops the run before
        // its first request: exit 73, both sizes said; the reason stays in the run record for
        // status; the metrics keep the last success. (A disk that fills up during a run names the
        // entry, the bytes it needs and the bytes free: DestinationTests.)
        if world.mounted {
            try world.publish(["docs/a-renamed.bin": (200_000, 1), "b.bin": (300_000, 3), "big.bin": (12 << 20, 4)])
            step = try world.sync("disk full")
            #expect(step.run.exitCode == 73, "\(step.run)")
            let said = "not enough space in "
            #expect(step.run.stderr.contains(said), "\(step.run.stderr)")
            #expect(step.run.stderr.contains("the files to fetch need 12.0 MiB and its file system has "), "\(step.run.stderr)")
            #expect(step.run.stderr.contains(" free; free "), "\(step.run.stderr)")
            #expect((step.json["reason"] as? String)?.contains(said) == true, "\(step.run.stdout)")
            #expect(step.metric("mirror_last_run_result", [#"result="unwritable""#]) == 1)
            #expect(step.metric("mirror_last_success_timestamp_seconds") != nil, "the last success is kept")
            status = try world.status()
            #expect(status.text.contains("  stopped: " + said), "\(status.text)")
            #expect((status.lastRun?["reason"] as? String)?.contains(said) == true, "\(status.json)")
            // The admin grows the volume and unpublishes big.bin; the next run ends ok with no
            // partial left (the space check stopped the run before it wrote one).
            try world.grow()
            try world.publish(["docs/a-renamed.bin": (200_000, 1), "b.bin": (300_000, 3)])
            step = try world.sync("space freed")
            #expect(step.run.exitCode == 0, "\(step.run)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: world.dest + "/.mirror/partial").isEmpty,
                    "the partial of the unpublished big.bin is removed")
        } else {
            print("day2: DayTwoScenarioTests: no tmpfs could be mounted (\(world.mountFailure)); the disk-full step is skipped")
        }

        // 6. Network loss: the server goes away in the middle of a transfer. Exit 75 (try again
        // later), "no source could be reached" in --json, the metrics and status; the partial stays.
        try world.publish(["docs/a-renamed.bin": (200_000, 1), "b.bin": (300_000, 3), "net.bin": (6 << 20, 5)])
        let running = try world.startSync()
        let partial = world.dest + "/.mirror/partial/" + PartialFile.name(for: "net.bin")
        try Wait.until("net.bin's partial file holds 1 MiB or the run ended", timeout: 60) {
            (FileDamage.size(of: partial) ?? 0) >= 1 << 20 || !running.isRunning
        }
        world.server.stop()
        step = try world.finish(running, "network loss")
        #expect(step.run.exitCode == 75, "\(step.run)")
        #expect(step.json["result"] as? String == "incomplete")
        #expect(step.json["reason"] as? String == "no source could be reached", "\(step.run.stdout)")
        #expect(step.metric("mirror_last_run_result", [#"result="incomplete""#]) == 1)
        #expect(step.metric("mirror_last_success_timestamp_seconds") != nil)
        status = try world.status()
        #expect(status.text.contains("  stopped: no source could be reached"), "\(status.text)")
        #expect(status.text.contains("partial     net.bin: ") || status.text.contains("failed      net.bin: "), "\(status.text)")
    }
}

/// The scenario's world: a served folder with its manifest at a URL, a destination (on a tmpfs
/// when one can be mounted), a metrics file, and the steps' outputs.
final class DayTwo {
    let dir: TemporaryDirectory
    let www: String
    let dest: String
    let metrics: String
    let server: NginxServer
    private(set) var mounted = false
    private(set) var mountFailure = ""
    private let volume: String

    var manifestURL: String { server.url("manifest.yaml") }

    init() throws {
        dir = try TemporaryDirectory(prefix: "mirror-day2")
        www = dir.path("www")
        volume = dir.path("volume")
        dest = volume + "/dest"
        metrics = dir.path("mirror.prom")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: volume, withIntermediateDirectories: true)
        server = try NginxServer(root: www, options: .init(limitRate: "2m"))
        let mount = try? ChildProcess.run("/bin/mount", ["-t", "tmpfs", "-o", "size=8m,mode=0755", "tmpfs", volume], timeout: 20)
        if let mount, mount.exitCode == 0 {
            mounted = true
        } else {
            mountFailure = mount.map { "mount exit \($0.exitCode): \($0.stderr.trimmingCharacters(in: .whitespacesAndNewlines))" }
                ?? "no /bin/mount"
        }
    }

    /// The volume grown to 32 MiB (`mount -o remount,size=32m`), as an admin makes room.
    func grow() throws {
        let remount = try ChildProcess.run("/bin/mount", ["-o", "remount,size=32m", volume], timeout: 20)
        guard remount.exitCode == 0 else { throw HarnessError("remount \(volume): \(remount)") }
    }

    /// Always called (`defer`): a lazy unmount, so a process still in the folder cannot keep it.
    func unmount() {
        guard mounted else { return }
        server.stop()
        _ = try? ChildProcess.run("/bin/umount", ["-l", volume], timeout: 20)
        mounted = false
    }

    /// Serves exactly `files` (path: size, seed) and the manifest that lists them at `manifestURL`.
    func publish(_ files: [String: (Int64, UInt64)]) throws {
        var manifest = ManifestBuilder(baseURL: server.baseURL)
        for (path, (size, seed)) in files.sorted(by: { $0.key < $1.key }) {
            let file = www + "/" + path
            try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            manifest.add(path: path, size: size, sha256: try TestData.writeFile(at: file, size: size, seed: seed))
        }
        try manifest.write(to: www + "/manifest.yaml")
    }

    func manifestBytes() throws -> Data { try Data(contentsOf: URL(fileURLWithPath: www + "/manifest.yaml")) }

    func mirror(_ args: [String], timeout: Double = 120) throws -> ProcessResult {
        try Mirror.run(args, timeout: timeout)
    }

    var syncArgs: [String] { ["sync", manifestURL, "--dest", dest, "--json", "--metrics-file", metrics] }

    func sync(_ name: String) throws -> Step { try Step(name, try mirror(syncArgs), metricsFile: metrics) }

    func startSync() throws -> ChildProcess {
        try Mirror.start(syncArgs + ["--segments", "1"])
    }

    func finish(_ run: ChildProcess, _ name: String) throws -> Step { try Step(name, try run.wait(timeout: 120), metricsFile: metrics) }

    func status() throws -> StatusStep {
        let text = try mirror(["status", manifestURL, "--dest", dest])
        let json = try mirror(["status", manifestURL, "--dest", dest, "--json"])
        print("day2 status: exit \(text.exitCode)\n" + text.stdout.split(separator: "\n").map { "day2   " + $0 }.joined(separator: "\n"))
        return StatusStep(run: text, json: json.stdout)
    }
}

/// One sync step's outputs, parsed.
struct Step {
    let run: ProcessResult
    let json: [String: Any]
    let samples: [String: Double]

    init(_ name: String, _ run: ProcessResult, metricsFile: String) throws {
        self.run = run
        json = FaultFixture.json(run) ?? [:]
        samples = (try? PrometheusText.parse(try String(contentsOfFile: metricsFile, encoding: .utf8))) ?? [:]
        let shown = samples.filter { $0.key.hasPrefix("mirror_last_run_success") || $0.key.hasPrefix("mirror_manifest_source")
            && $0.value == 1 || $0.key.hasPrefix("mirror_last_run_result") && $0.value == 1 || $0.key.hasPrefix("mirror_last_success")
            || $0.key.hasPrefix("mirror_manifest_age") }
            .map { "\($0.key.replacingOccurrences(of: #"\{[^}]*dest="[^"]*",?"#, with: "{", options: .regularExpression)) \($0.value)" }
            .sorted()
        print("day2 step \(name): exit \(run.exitCode)\nday2   json \(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines))\n"
            + (run.stderr.isEmpty ? "" : "day2   stderr \(run.stderr.trimmingCharacters(in: .whitespacesAndNewlines))\n")
            + shown.map { "day2   metric " + $0 }.joined(separator: "\n"))
    }

    var manifest: [String: Any] { json["manifest"] as? [String: Any] ?? [:] }
    var files: [String: Any] { json["files"] as? [String: Any] ?? [:] }
    var lastSuccessUnix: Int? { (json["last_success"] as? [String: Any])?["end_unix"] as? Int }

    func metric(_ name: String, _ having: [String] = []) -> Double? { PrometheusText.value(samples, name, having: having) }
}

struct StatusStep {
    let run: ProcessResult
    let json: String
    var text: String { run.stdout }
    var lastRun: [String: Any]? {
        ((try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any])?["last_run"] as? [String: Any]
    }
}
