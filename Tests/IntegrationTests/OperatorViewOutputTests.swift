import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// What an operator reads, as an admin meets it: the outputs of one command each.
@Suite(.serialized) struct OperatorViewOutputTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    func mirror(_ args: [String]) throws -> ProcessResult {
        try Mirror.run(args, timeout: 60)
    }

    /// `status URL --dest DEST` and `verify URL --dest DEST` with no copy kept yet say so
    /// and what to do, exit 65 (before: "cannot read manifest: No such file or directory").
    @Test func statusAndVerifyOfAURLWithoutAKeptCopySayWhy() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-ops")
        for command in ["status", "verify"] {
            let run = try mirror([command, "http://127.0.0.1:1/m.yaml", "--dest", dir.path("d")])
            #expect(run.exitCode == 65, "\(command): \(run)")
            #expect(run.stderr.contains("http://127.0.0.1:1/m.yaml: no last good copy of the manifest to read in \(dir.path("d"))/.mirror/manifest: "
                + "there is none (no sync has fetched it yet); status and verify never use the network"), "\(run.stderr)")
            let usage = try mirror([command, "http://127.0.0.1:1/m.yaml"])
            #expect(usage.exitCode == 64, "a URL needs --dest: \(usage)")
        }
    }

    /// The dry run ends with its totals, in text and in `--json` (`deletions` 0 for now).
    @Test func theDryRunEndsWithItsTotals() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 1000, seed: 1)
        try fx.addFile("b.bin", size: 3000, seed: 2)
        try fx.writeManifest()
        let text = try fx.sync(["--dry-run"])
        #expect(text.exitCode == 0, "\(text)")
        #expect(text.stdout.hasSuffix("mirror: dry run: 2 files to download (3.9 KiB), 0 to delete; nothing was changed\n"), "\(text.stdout)")
        let json = try fx.sync(["--dry-run", "--json"])
        let totals = try #require(FaultFixture.json(json)?["dry_run"] as? [String: Any], "\(json.stdout)")
        #expect(totals["files"] as? Int == 2 && totals["bytes"] as? Int == 4000 && totals["deletions"] as? Int == 0, "\(totals)")
        #expect(!fx.exists(fx.dest))
    }

    /// A dry run plans while the manifest is read (PlanLookAhead, batches of 4096 entries): over
    /// 5000 synced files, the ones changed since, each right after an unchanged one, are listed,
    /// in manifest order, and nothing else is.
    @Test func aDryRunOverThousandsOfFilesListsExactlyTheChangedOnes() throws {
        let fx = try SyncFixture()
        for i in 0 ..< 5000 {
            let path = "d\(i / 500)/f\(i).bin"
            try TestData.bytes(count: 8, seed: UInt64(i + 1)).withUnsafeBytes { raw in
                try FileManager.default.createDirectory(atPath: fx.www + "/d\(i / 500)", withIntermediateDirectories: true)
                guard FileManager.default.createFile(atPath: fx.www + "/" + path, contents: Data(raw)) else { throw HarnessError("cannot write \(path)") }
            }
            fx.manifest.add(path: path, size: 8, sha256: TestData.sha256(of: TestData.bytes(count: 8, seed: UInt64(i + 1))))
        }
        try fx.writeManifest()
        let first = try fx.sync(["--quiet"])
        try #require(first.exitCode == 0, "\(first)")
        let changed = [1, 7, 4095, 4096, 4999]
        for i in changed { _ = try TestData.writeFile(at: fx.destPath("d\(i / 500)/f\(i).bin"), size: 8, seed: 77) }
        try FileManager.default.removeItem(atPath: fx.destPath("d2/f1001.bin"))

        let dry = try fx.sync(["--dry-run"])
        #expect(dry.exitCode == 0, "\(dry)")
        let listed = dry.stdout.split(separator: "\n").filter { !$0.hasPrefix("mirror:") }.map(String.init)
        let expected = [1, 7, 1001, 4095, 4096, 4999].map { i in
            i == 1001 ? "download d2/f1001.bin (8 B)" : "check d\(i / 500)/f\(i).bin (present, not yet verified)"
        }
        #expect(listed == expected, "\(dry.stdout)")
        #expect(dry.stdout.contains("mirror: dry run: 1 file to download (8 B), 5 to check, 0 to delete; nothing was changed"), "\(dry.stdout)")
    }

    /// `--summary` prints one line for a first sync of 20 files, and the failures (before:
    /// 21 lines, or nothing with --quiet); nothing when nothing changed.
    @Test func summaryPrintsOneLinePerRunAndTheFailures() throws {
        let fx = try SyncFixture()
        for i in 0..<20 { try fx.addFile("f\(i).bin", size: 1000, seed: UInt64(i + 1)) }
        fx.manifest.add(path: "gone.bin", size: 5, sha256: String(repeating: "ab", count: 32))
        try fx.writeManifest()
        let first = try fx.sync(["--summary"])
        #expect(first.exitCode == 1, "\(first)")
        #expect(first.stdout.split(separator: "\n").count == 1, "\(first.stdout)")
        #expect(first.stdout.hasPrefix("mirror: 20 downloaded, 1 failed"), "\(first.stdout)")
        #expect(first.stderr.contains("mirror: gone.bin: server answered HTTP 404 (Not Found)"), "\(first.stderr)")
        try fx.writeManifest()
        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        for i in 0..<20 { fx.manifest.add(path: "f\(i).bin", size: 1000, sha256: try TestData.sha256(ofFileAt: fx.www + "/f\(i).bin")) }
        try fx.writeManifest()
        let again = try fx.sync(["--summary"])
        #expect(again.exitCode == 0 && again.stdout.isEmpty && again.stderr.isEmpty, "no news, no mail: \(again)")
        let help = try mirror(["sync", "--help"])
        #expect(help.stdout.contains("--summary"), "\(help.stdout)")
    }

    /// `manifest --help` names signing; `--jobs` and `--connections` mean the same in `--help`, the README
    /// and docs/cli.md; the example manifest's `destination` agrees with the README; the systemd
    /// unit lets the service write the metrics and log paths the README suggests.
    @Test func helpReadmeExamplesAndTheUnitAgree() throws {
        let manifestHelp = try mirror(["manifest", "--help"])
        #expect(manifestHelp.stdout.contains("sign"), "\(manifestHelp.stdout)")
        #expect(manifestHelp.stdout.contains("Create manifests from folders, and sign them"), "\(manifestHelp.stdout)")
        let syncHelp = try mirror(["sync", "--help"]).stdout.replacingOccurrences(of: #"\s+"#, with: " ", options: .regularExpression)
        #expect(syncHelp.contains("--jobs <jobs> Files in flight: over HTTP/2 they are streams on one or two connections per transfer thread, over HTTP/1.1 they take turns on --connections. (default: 64)"), "\(syncHelp)")
        #expect(syncHelp.contains("--connections <connections> Connections to one host at most, all transfer threads together (1-256). (default: 16)"), "\(syncHelp)")
        let readme = try String(contentsOfFile: Self.repository + "/README.md", encoding: .utf8)
        let cli = try String(contentsOfFile: Self.repository + "/docs/cli.md", encoding: .utf8)
        for text in [readme, cli] {
            let jobs = text.split(separator: "\n").first { $0.hasPrefix("| `--jobs N`") } ?? ""
            #expect(jobs.contains("files in flight") && jobs.contains("64") && jobs.contains("`--connections`"), "\(jobs)")
            let connections = text.split(separator: "\n").first { $0.hasPrefix("| `--connections N`") } ?? ""
            #expect(connections.contains("connections to one host at most") || connections.contains("connections to one host"), "\(connections)")
            #expect(connections.contains("16"), "\(connections)")
            #expect(!text.contains("and connections per host"))
        }
        #expect(readme.contains("destination: media                            # optional; relative to the manifest's folder, or absolute"))
        let example = try String(contentsOfFile: Self.repository + "/manifests/lab-media.yaml", encoding: .utf8)
        #expect(example.contains("destination: /srv/lab-media          # absolute; a relative one is taken from this file's folder"))

        // The README's cron line uses the package's paths and writes only into folders the package makes.
        let package = try String(contentsOfFile: Self.repository + "/scripts/package", encoding: .utf8)
        let suggested = try #require(readme.split(separator: "\n").first { $0.hasPrefix("0 * * * *") }).split(separator: " ")
        #expect(suggested.contains("/usr/bin/mirror"), "\(suggested)")
        for option in ["--metrics-file", "--log-file"] {
            let index = try #require(suggested.firstIndex { $0 == option }, "\(option) in the README's cron line")
            let folder = (String(suggested[index + 1]) as NSString).deletingLastPathComponent
            #expect(package.contains("\"$root\(folder)\""), "\(option): scripts/package makes no \(folder)")
        }
    }
}
