import Foundation
@testable import MirrorModel
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport

/// The textfile collector format, parsed line by line (Prometheus exposition format 0.0.4).
@Suite struct MetricsFileTests {
    /// Every line valid (``PrometheusText``), every metric named `mirror_…` and a gauge.
    static func parse(_ text: String) throws -> [String: Double] {
        let samples = try PrometheusText.parse(text)
        #expect(samples.keys.allSatisfy { $0.hasPrefix("mirror_") })
        for line in text.split(separator: "\n") where line.hasPrefix("# TYPE ") { #expect(line.hasSuffix(" gauge")) }
        return samples
    }

    func summary() -> SyncSummary {
        var s = SyncSummary()
        s.result = .failed
        s.total = 10
        s.upToDate = 5
        s.checked = 1
        s.downloaded = 2
        s.replaced = 1
        s.failed = 1
        s.bytesTransferred = 123_456
        return s
    }

    @Test func aFailedRunHasEveryMetricWithItsValue() throws {
        let metrics = RunMetrics(manifest: "https://user:pw@example.org/m.yaml", destination: "/srv/a \"b\"",
                                 start: 1_700_000_000.25, end: 1_700_000_012.5, result: .failed, exitCode: 1, summary: summary())
        let text = MetricsFile.render(metrics)
        #expect(!text.contains("pw"), "credentials in the metrics")
        let samples = try Self.parse(text)
        let labels = #"manifest="https://***@example.org/m.yaml",dest="/srv/a \"b\"""#
        func value(_ name: String, _ extra: String = "") -> Double? {
            samples["mirror_\(name){\(labels)\(extra.isEmpty ? "" : "," + extra)}"]
        }
        #expect(value("last_run_start_timestamp_seconds") == 1_700_000_000.25)
        #expect(value("last_run_end_timestamp_seconds") == 1_700_000_012.5)
        #expect(value("last_run_duration_seconds") == 12.25)
        #expect(value("last_run_success") == 0)
        #expect(value("last_run_result", #"result="failed""#) == 1)
        #expect(value("last_run_result", #"result="ok""#) == 0)
        #expect(samples.keys.filter { $0.hasPrefix("mirror_last_run_result{") }.count == RunMetrics.Result.allCases.count)
        #expect(value("last_run_exit_code") == 1)
        #expect(value("last_run_bytes_transferred") == 123_456)
        #expect(value("last_run_files", #"state="up_to_date""#) == 6)
        #expect(value("last_run_files", #"state="downloaded""#) == 2)
        #expect(value("last_run_files", #"state="replaced""#) == 1)
        #expect(value("last_run_files", #"state="failed""#) == 1)
        #expect(value("last_run_files", #"state="pending""#) == 0)
        #expect(value("manifest_files") == 10)
    }

    @Test func aRunThatNeverPlannedStillSaysHowItEnded() throws {
        let metrics = RunMetrics(manifest: "m.yaml", destination: nil, start: 10, end: 11, result: .invalidManifest,
                                 exitCode: 65, summary: nil)
        let samples = try Self.parse(MetricsFile.render(metrics))
        #expect(samples[#"mirror_last_run_result{manifest="m.yaml",result="invalid_manifest"}"#] == 1)
        #expect(samples[#"mirror_last_run_exit_code{manifest="m.yaml"}"#] == 65)
        #expect(samples.keys.allSatisfy { !$0.hasPrefix("mirror_last_run_files") })
    }

    @Test func theFileIsReplacedWhole() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-metrics")
        let path = dir.path("mirror.prom")
        try "old".write(toFile: path, atomically: false, encoding: .utf8)
        let metrics = RunMetrics(manifest: "m.yaml", destination: "d", start: 1, end: 2, result: .ok, exitCode: 0, summary: summary())
        try MetricsFile.write(metrics, to: path)
        let written = try String(contentsOfFile: path, encoding: .utf8)
        #expect(written.hasPrefix(MetricsFile.render(metrics)), "the run's metrics, then the locked-runs counter")
        #expect(written.hasSuffix("mirror_locked_runs_total{manifest=\"m.yaml\",dest=\"d\"} 0\n"), "\(written)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["mirror.prom"], "no temporary file left")
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o644)
        #expect(throws: SystemError.self) { try MetricsFile.write(metrics, to: dir.path("missing/mirror.prom")) }
    }
}

/// Where the manifest came from, its age and the last successful run, so an
/// admin can alert on a stale machine that still ends `ok`.
@Suite struct MetricsFileManifestTests {
    @Test func theManifestsSourceDigestAgeAndTheLastSuccessAreThere() throws {
        var summary = SyncSummary()
        summary.lastSuccess = 1_000
        let provenance = ManifestProvenance(source: .savedCopy, sha256: "ab12", etag: "\"v1\"", confirmed: 500)
        let metrics = RunMetrics(manifest: "m.yaml", destination: "d", start: 1_990, end: 2_000, result: .ok, exitCode: 0,
                                 summary: summary, provenance: provenance)
        let samples = try MetricsFileTests.parse(MetricsFile.render(metrics))
        #expect(PrometheusText.value(samples, "mirror_last_success_timestamp_seconds") == 1_000)
        #expect(PrometheusText.value(samples, "mirror_manifest_source", having: [#"source="saved_copy""#]) == 1)
        #expect(PrometheusText.value(samples, "mirror_manifest_source", having: [#"source="fetched""#]) == 0)
        #expect(PrometheusText.value(samples, "mirror_manifest_info", having: [#"sha256="ab12""#, #"etag="\"v1\"""#]) == 1)
        #expect(PrometheusText.value(samples, "mirror_manifest_confirmed_timestamp_seconds") == 500)
        #expect(PrometheusText.value(samples, "mirror_manifest_age_seconds") == 1_500)
    }

    /// A run that ended before it read the journal (the server down and no copy: exit 75) keeps
    /// the last success of the file it replaces, so "not in sync for 2 h" keeps counting from it.
    @Test func aRunWithoutTheJournalCarriesTheLastSuccessOver() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-metrics")
        let path = dir.path("mirror.prom")
        var summary = SyncSummary()
        summary.lastSuccess = 1_234
        try MetricsFile.write(RunMetrics(manifest: "m", destination: "d", start: 1, end: 2, result: .ok, exitCode: 0, summary: summary), to: path)
        try MetricsFile.write(RunMetrics(manifest: "m", destination: "d", start: 3, end: 4, result: .unreachable, exitCode: 75, summary: nil), to: path)
        let samples = try PrometheusText.parse(try String(contentsOfFile: path, encoding: .utf8))
        #expect(PrometheusText.value(samples, "mirror_last_success_timestamp_seconds") == 1_234)
        #expect(PrometheusText.value(samples, "mirror_last_run_success") == 0)
    }
}
