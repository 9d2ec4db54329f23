import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// `--summary` behind a fleet's cron: the failures of a run are grouped by cause and host and
/// capped to a handful of lines, with how many more and where to read them (docs/cli.md,
/// "Output"). Before, a mistyped `base_url` mailed a line per entry from every machine.
@Suite(.serialized) struct SummaryGroupsTests {
    static let files = 40

    /// 40 files served, a manifest whose `base_url` has a typo: every entry is a 404 from one host.
    func typoFixture() throws -> SyncFixture {
        let fx = try SyncFixture(basePath: "lab-mdeia/")
        for i in 0 ..< Self.files { try fx.addFile("set/f\(i).bin", size: 100, seed: UInt64(i + 1)) }
        try fx.writeManifest()
        return fx
    }

    func origin(_ fx: SyncFixture) -> String { String(fx.server.baseURL.dropLast()) }

    func lines(_ text: String) -> [String] { text.split(separator: "\n").map(String.init) }

    @Test func aMistypedBaseURLIsAHandfulOfLinesWithTheCountAndHowManyMore() throws {
        let fx = try typoFixture()
        let run = try fx.sync(["--summary"])
        #expect(run.exitCode == 1, "\(run)")
        #expect(lines(run.stdout).count == 1 && run.stdout.hasPrefix("mirror: 40 failed in "), "\(run.stdout)")
        let errors = lines(run.stderr)
        #expect(errors.count <= 5, "a handful of lines, not one per file: \(run.stderr)")
        #expect(errors.first?.hasPrefix("mirror: 40 files failed: server answered HTTP 404 (Not Found) from \(origin(fx)) (set/f") == true, "\(run.stderr)")
        #expect(errors.first?.hasSuffix(", …)") == true, "\(run.stderr)")
        #expect(errors.last == "mirror: and 37 more failed files: `mirror status \(fx.manifestPath) --dest \(fx.dest)` lists every one", "\(run.stderr)")

        // The command it names does list every one.
        let status = try Mirror.run(["status", fx.manifestPath, "--dest", fx.dest], timeout: 60)
        #expect(lines(status.stdout).filter { $0.hasPrefix("failed ") && $0.contains("HTTP 404") }.count == Self.files, "\(status)")
    }

    @Test func withALogFileTheMoreLinePointsThereAndTheLogHasEveryFile() throws {
        let fx = try typoFixture()
        let log = fx.dir.path("mirror.log")
        let run = try fx.sync(["--summary", "--log-file", log])
        #expect(run.exitCode == 1, "\(run)")
        let errors = lines(run.stderr)
        #expect(errors.count == 2, "\(run.stderr)")
        #expect(errors.last == "mirror: and 37 more failed files: every one is in \(log)", "\(run.stderr)")
        let logged = try String(contentsOfFile: log, encoding: .utf8)
        #expect(lines(logged).filter { $0.contains(" failed set/f") && $0.contains("HTTP 404") }.count == Self.files, "\(logged)")
    }

    /// Without `--summary` every failed file keeps its own line, and `--json` lists each one.
    @Test func otherModesStillNameEveryFailure() throws {
        let fx = try typoFixture()
        let text = try fx.sync()
        #expect(text.exitCode == 1, "\(text)")
        #expect(lines(text.stderr).filter { $0.contains(": server answered HTTP 404 (Not Found)") }.count == Self.files, "\(text.stderr)")
        let json = try fx.sync(["--json"])
        let failures = try #require(FaultFixture.json(json)?["failures"] as? [[String: Any]], "\(json.stdout)")
        #expect(failures.count == Self.files)
    }
}
