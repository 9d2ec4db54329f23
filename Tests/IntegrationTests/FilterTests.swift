import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// `--include`, `--exclude` and `--filter-from` (docs/cli.md, "Choosing what a machine syncs"),
/// against nginx: a machine syncs its subset and nothing else, an excluded path is neither fetched
/// nor deleted (but by `--delete-excluded`), and `status`, `verify`, `--json` and the metrics count
/// the selected set and say how many entries the filter left out.
@Suite(.serialized) struct FilterTests {
    /// Two courses and an image: room 3 needs only bio101.
    static func courses() throws -> SyncFixture {
        let fx = try SyncFixture()
        try fx.addFile("courses/bio101/week1.mp4", size: 300_000, seed: 1)
        try fx.addFile("courses/bio101/notes/week1.pdf", size: 20_000, seed: 2)
        try fx.addFile("courses/chem200/lab.mp4", size: 400_000, seed: 3)
        try fx.addFile("images/win.iso", size: 500_000, seed: 4)
        try fx.writeManifest()
        return fx
    }

    @Test func anIncludeSyncsThatSubsetAloneAndEveryReportCountsIt() throws {
        let fx = try Self.courses()
        let metrics = fx.dir.path("mirror.prom")
        let run = try fx.sync(["--include", "courses/bio101", "--json", "--metrics-file", metrics])
        #expect(run.exitCode == 0, "\(run)")
        let files = try #require(FaultFixture.json(run)?["files"] as? [String: Any], "\(run.stdout)")
        #expect(files["total"] as? Int == 2 && files["downloaded"] as? Int == 2 && files["excluded"] as? Int == 2, "\(files)")
        #expect(fx.exists(fx.destPath("courses/bio101/week1.mp4")) && fx.exists(fx.destPath("courses/bio101/notes/week1.pdf")))
        #expect(!fx.exists(fx.destPath("courses/chem200")) && !fx.exists(fx.destPath("images")))
        let asked = try fx.requestsSoFar().map(\.uri)
        #expect(!asked.contains { $0.contains("chem200") || $0.contains("win.iso") }, "\(asked)")
        let samples = try PrometheusText.parse(try String(contentsOfFile: metrics, encoding: .utf8))
        #expect(PrometheusText.value(samples, "mirror_manifest_files") == 2, "\(samples)")
        #expect(PrometheusText.value(samples, "mirror_manifest_files_excluded") == 2, "\(samples)")

        // The same filter: status calls the set done, verify checks two files; without it, both
        // see the two files this machine does not hold.
        let status = try Mirror.run(["status", fx.manifestPath, "--dest", fx.dest, "--include", "courses/bio101"])
        #expect(status.exitCode == 0 && status.stdout.contains("files: 2 selected of 4 in the manifest (2 left out by the filter)"), "\(status)")
        #expect(!status.stdout.contains("missing"), "\(status)")
        let verify = try Mirror.run(["verify", fx.manifestPath, "--dest", fx.dest, "--include", "courses/bio101"])
        #expect(verify.exitCode == 0 && verify.stdout.contains("2 good of 2 (2 left out by the filter)"), "\(verify)")
        // Without options, both count what the last sync selected (it recorded its rules), and say so.
        for command in ["status", "verify"] {
            let remembered = try Mirror.run([command, fx.manifestPath, "--dest", fx.dest])
            #expect(remembered.exitCode == 0 && remembered.stdout.contains(command == "status" ? "2 selected of 4" : "2 good of 2")
                    && !remembered.stdout.contains("missing"), "\(command): \(remembered)")
            #expect(remembered.stderr.contains("the selection of the last sync: --include 'courses/bio101' (give --include '**' for every entry)"),
                    "\(remembered.stderr)")
        }
        let every = try Mirror.run(["verify", fx.manifestPath, "--dest", fx.dest, "--include", "**"])
        #expect(every.exitCode == 1 && every.stdout.contains("2 missing"), "\(every)")

        let again = try fx.sync(["--include", "courses/bio101"])
        #expect(again.exitCode == 0 && again.stdout.isEmpty, "\(again)")
        // A sync with no selection syncs everything, and status then counts everything again.
        #expect(try fx.sync().exitCode == 0)
        let whole = try Mirror.run(["status", fx.manifestPath, "--dest", fx.dest])
        #expect(whole.stdout.contains("files: 4 in the manifest") && !whole.stderr.contains("selection"), "\(whole)")
    }

    /// The order of the options decides, across `--include`, `--exclude` and `--filter-from`:
    /// the last matching rule wins, and the first one sets what an unmatched path gets.
    @Test func theLastMatchingRuleDecidesAcrossOptionsAndFiles() throws {
        let fx = try Self.courses()
        let rules = fx.dir.path("room3.rules")
        try "# room 3\n- courses/**/notes/\n".write(toFile: rules, atomically: true, encoding: .utf8)
        let run = try fx.sync(["--exclude", "*.iso", "--exclude=courses/chem200/**", "--filter-from", rules,
                               "--include", "courses/bio101/notes/week1.pdf", "--json"])
        #expect(run.exitCode == 0, "\(run)")
        // Unmatched paths are kept (the first rule excludes); the file's own include comes last.
        #expect(fx.exists(fx.destPath("courses/bio101/week1.mp4")))
        #expect(fx.exists(fx.destPath("courses/bio101/notes/week1.pdf")))
        #expect(!fx.exists(fx.destPath("courses/chem200/lab.mp4")) && !fx.exists(fx.destPath("images/win.iso")))
        #expect((FaultFixture.json(run)?["files"] as? [String: Any])?["excluded"] as? Int == 2, "\(run.stdout)")
    }

    /// `--delete` touches the selected set only: a file installed earlier at a path the filter now
    /// leaves out stays (and so does a file of the user's there); `--delete-excluded` removes the
    /// one mirror installed, not the user's.
    @Test func deleteKeepsWhatTheFilterLeavesOutAndDeleteExcludedRemovesWhatMirrorInstalled() throws {
        let fx = try Self.courses()
        let first = try fx.sync()
        #expect(first.exitCode == 0, "\(first)")
        try Data("mine".utf8).write(to: URL(fileURLWithPath: fx.destPath("images/notes.txt")))

        let kept = try fx.sync(["--exclude", "images/", "--delete", "--delete-unlisted"])
        #expect(kept.exitCode == 0, "\(kept)")
        #expect(fx.exists(fx.destPath("images/win.iso")) && fx.exists(fx.destPath("images/notes.txt")))
        let keptPlain = try fx.sync(["--exclude", "images/", "--delete"])
        #expect(keptPlain.exitCode == 0 && fx.exists(fx.destPath("images/win.iso")), "\(keptPlain)")

        let dry = try fx.sync(["--exclude", "images/", "--delete-excluded", "--dry-run"])
        #expect(dry.exitCode == 0 && dry.stdout.contains("delete images/win.iso"), "\(dry)")
        #expect(!dry.stdout.contains("images/notes.txt"), "\(dry)")
        let removed = try fx.sync(["--exclude", "images/", "--delete-excluded", "--json"])
        #expect(removed.exitCode == 0, "\(removed)")
        #expect(!fx.exists(fx.destPath("images/win.iso")) && fx.exists(fx.destPath("images/notes.txt")))
        #expect((FaultFixture.json(removed)?["files"] as? [String: Any])?["deleted"] as? Int == 1, "\(removed.stdout)")
        #expect(fx.exists(fx.destPath("courses/chem200/lab.mp4")))
    }

    /// An atomic DEST: a new generation holds the selected set and keeps, as links, the files of
    /// the current set the filter leaves out; a second run with the same filter builds nothing.
    @Test func anAtomicGenerationKeepsWhatTheFilterLeavesOut() throws {
        let fx = try Self.courses()
        let first = try fx.sync(["--atomic"])
        #expect(first.exitCode == 0, "\(first)")
        let chem = try TestData.writeFile(at: fx.www + "/courses/chem200/lab.mp4", size: 400_000, seed: 30)
        try TestData.writeFile(at: fx.www + "/courses/bio101/week1.mp4", size: 300_000, seed: 31)
        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        for (path, size, seed) in [("courses/bio101/week1.mp4", 300_000, 31), ("courses/bio101/notes/week1.pdf", 20_000, 2),
                                   ("courses/chem200/lab.mp4", 400_000, 30), ("images/win.iso", 500_000, 4)] {
            fx.manifest.add(path: path, size: Int64(size), sha256: TestData.sha256(of: TestData.bytes(count: size, seed: UInt64(seed))))
        }
        try fx.writeManifest()
        let oldChem = try TestData.sha256(ofFileAt: fx.destPath("courses/chem200/lab.mp4"))

        let run = try fx.sync(["--atomic", "--exclude", "courses/chem200", "--json"])
        #expect(run.exitCode == 0, "\(run)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("courses/bio101/week1.mp4"))
                == TestData.sha256(of: TestData.bytes(count: 300_000, seed: 31)))
        // Left out: neither fetched (the old bytes stay) nor dropped from the new set.
        #expect(try TestData.sha256(ofFileAt: fx.destPath("courses/chem200/lab.mp4")) == oldChem && oldChem != chem)
        #expect((FaultFixture.json(run)?["files"] as? [String: Any])?["deleted"] as? Int == 0, "\(run.stdout)")
        let target = try FileManager.default.destinationOfSymbolicLink(atPath: fx.dest)

        let again = try fx.sync(["--atomic", "--exclude", "courses/chem200"])
        #expect(again.exitCode == 0 && again.stdout.isEmpty, "\(again)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: fx.dest) == target, "a no-op built a generation")
    }

    @Test func aPatternThatMatchesNothingIsAWarningAndAMalformedOneIsAUsageError() throws {
        let fx = try Self.courses()
        let typo = try fx.sync(["--exclude", "*.isoo"])
        #expect(typo.exitCode == 0 && typo.stderr.contains("--exclude '*.isoo' matches no entry of"), "\(typo)")
        #expect(fx.exists(fx.destPath("images/win.iso")))

        let malformed = try fx.sync(["--include", "courses/[bio"])
        #expect(malformed.exitCode == 64 && malformed.stderr.contains("--include 'courses/[bio'"), "\(malformed)")
        let rules = fx.dir.path("bad.rules")
        try "+ courses/**\n*.iso\n".write(toFile: rules, atomically: true, encoding: .utf8)
        let badFile = try fx.sync(["--filter-from", rules])
        #expect(badFile.exitCode == 64 && badFile.stderr.contains("bad.rules:2:"), "\(badFile)")
        let missing = try Mirror.run(["status", fx.manifestPath, "--dest", fx.dest, "--filter-from", fx.dir.path("none.rules")])
        #expect(missing.exitCode == 64 && missing.stderr.contains("none.rules: cannot read it"), "\(missing)")
        let lonely = try fx.sync(["--delete-excluded"])
        #expect(lonely.exitCode == 64, "\(lonely)")
    }
}
