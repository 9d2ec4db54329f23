import MirrorFS
import MirrorKit
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// `--metrics-file PATH`: the last run in Prometheus text exposition format, for node_exporter's
/// textfile collector (`--collector.textfile.directory`), so a fleet of machines can be watched
/// and alerted on ("no successful run for 2 days", "files failing").
///
/// Written after every run that got as far as reading its options, whatever its end: success,
/// failed entries, deadline, a held lock, an invalid or unreachable manifest, an unwritable
/// destination; `--dry-run` writes nothing (it is not a sync). The file is replaced atomically
/// (temporary file in the same folder, `fsync`, `rename`; see ``replaceFileAtomically``), which is
/// what the textfile collector's documentation asks for: it must never read a half-written file.
public struct RunMetrics: Sendable {
    /// How a run ended, as the `result` label of `mirror_last_run_result`.
    public enum Result: String, Sendable, CaseIterable {
        case ok, failed, incomplete
        /// The manifest could not be read (exit 66) or broke a rule (exit 65).
        case invalidManifest = "invalid_manifest"
        /// Another run held the destination's lock (exit 75).
        case locked
        /// The destination could not be written (exit 73).
        case unwritable
        /// A manifest URL could not be fetched and there was no last good copy (exit 75).
        case unreachable
        /// The server answered 404 or 410 for the manifest URL (exit 1).
        case manifestNotFound = "manifest_not_found"
        /// Anything else that ended the run early.
        case error
    }

    /// The manifest as given (path or URL; user-info masked on output by ``redactedURL(_:)``).
    public var manifest: String
    public var destination: String?
    /// Unix seconds.
    public var start: Double
    public var end: Double
    public var result: Result
    public var exitCode: Int32
    /// The run's counts, when it got as far as planning.
    public var summary: SyncSummary?
    /// Where the manifest came from, when it was loaded.
    public var provenance: ManifestProvenance?
    /// Unix end of the last run that ended `ok`: from the journal (``SyncSummary/lastSuccess``),
    /// else carried over from the file this one replaces (a run that ended before reading it).
    public var lastSuccess: Double?
    /// The manifest's `serial` and `expires` (Unix seconds), when it has them (docs/signing.md).
    public var manifestSerial: Int64?
    public var manifestExpires: Int64?

    public init(manifest: String, destination: String?, start: Double, end: Double, result: Result,
                exitCode: Int32, summary: SyncSummary?, provenance: ManifestProvenance? = nil) {
        self.manifest = manifest
        self.destination = destination
        self.start = start
        self.end = end
        self.result = result
        self.exitCode = exitCode
        self.summary = summary
        self.provenance = provenance
        lastSuccess = summary?.lastSuccess.map(Double.init)
    }
}

public enum MetricsFile {
    /// The exposition text (version 0.0.4): `# HELP` and `# TYPE` for each metric, then its samples,
    /// every sample labelled with the manifest (and the destination when known).
    public static func render(_ m: RunMetrics) -> String {
        let common = labels(m)
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(String, String)]) {
            out += "# HELP mirror_\(name) \(help)\n# TYPE mirror_\(name) \(type)\n"
            for (extra, value) in samples {
                out += "mirror_\(name){\(common)\(extra.isEmpty ? "" : "," + extra)} \(value)\n"
            }
        }
        metric("last_run_start_timestamp_seconds", "gauge", "Unix time at which the last sync run started.",
               [("", number(m.start))])
        metric("last_run_end_timestamp_seconds", "gauge", "Unix time at which the last sync run ended.",
               [("", number(m.end))])
        metric("last_run_duration_seconds", "gauge", "Wall-clock duration of the last sync run.",
               [("", number(max(0, m.end - m.start)))])
        metric("last_run_success", "gauge", "1 if the last sync run left every file present and verified, else 0.",
               [("", m.result == .ok ? "1" : "0")])
        metric("last_run_result", "gauge", "How the last sync run ended: 1 for its result, 0 for the others.",
               RunMetrics.Result.allCases.map { ("result=\"\($0.rawValue)\"", $0 == m.result ? "1" : "0") })
        metric("last_run_exit_code", "gauge", "Exit code of the last sync run (0 ok, 1 failed files, 65, 73, 75).",
               [("", "\(m.exitCode)")])
        let s = m.summary
        metric("last_run_bytes_transferred", "gauge", "Bytes received from the network by the last sync run.",
               [("", "\(s?.bytesTransferred ?? 0)")])
        if let s {
            metric("last_run_files", "gauge", "Manifest entries by state at the end of the last sync run.", [
                ("state=\"up_to_date\"", "\(s.upToDate + s.checked)"),
                ("state=\"downloaded\"", "\(s.downloaded)"),
                ("state=\"replaced\"", "\(s.replaced)"),
                ("state=\"failed\"", "\(s.failed)"),
                ("state=\"pending\"", "\(s.pending)"),
            ])
            metric("manifest_files", "gauge", "Entries of the manifest the last sync run synced (all but those --include/--exclude left out).",
                   [("", "\(s.total)")])
            metric("manifest_files_excluded", "gauge", "Entries of the manifest that --include/--exclude left out in the last sync run.",
                   [("", "\(s.excluded)")])
            if let roundTrip = s.link.roundTrip {
                metric("last_run_round_trip_seconds", "gauge",
                       "Shortest wait from a request sent to its first response byte in the last sync run: about one round trip.",
                       [("", number(roundTrip))])
                metric("last_run_connections_opened", "gauge", "Connections the last sync run opened.", [("", "\(s.link.connections)")])
                metric("last_run_receive_bytes_per_second", "gauge",
                       "Bytes the last sync run received, over the time from its first request to its last.",
                       [("", number(s.link.bytesPerSecond(s.bytesTransferred) ?? 0))])
            }
            metric("last_run_deleted_files", "gauge", "Files the last sync run deleted (--delete, --delete-unlisted).",
                   [("", "\(s.deleted)")])
            metric("last_run_refused_files", "gauge",
                   "Files the last sync run did not download because their server still holds the file an earlier run refused.",
                   [("", "\(s.refused)")])
        }
        if let success = m.lastSuccess {
            metric(lastSuccessMetric, "gauge",
                   "Unix time at which the last sync run that left every file present and verified ended.", [("", number(success))])
        }
        if let serial = m.manifestSerial {
            metric("manifest_serial", "gauge", "The serial of the last run's manifest (raised with every publish).", [("", "\(serial)")])
        }
        if let expires = m.manifestExpires {
            metric("manifest_expiry_timestamp_seconds", "gauge",
                   "Unix time after which the last run's manifest is refused with --trust (its expires).", [("", "\(expires)")])
        }
        if let p = m.provenance {
            metric("manifest_source", "gauge",
                   "Where the last run's manifest came from: 1 for its source, 0 for the others (saved_copy: the server could not be asked).",
                   ManifestSource.allCases.map { ("source=\"\($0.rawValue)\"", $0 == p.source ? "1" : "0") })
            metric("manifest_info", "gauge", "The last run's manifest: its SHA-256 and the server's ETag (empty when none).",
                   [("sha256=\(labelValue(p.sha256 ?? "")),etag=\(labelValue(p.etag ?? ""))", "1")])
            if let confirmed = p.confirmed {
                metric("manifest_confirmed_timestamp_seconds", "gauge",
                       "Unix time at which the last run's manifest was last known current (fetched, or a 304; a file's mtime).",
                       [("", number(confirmed))])
                metric("manifest_age_seconds", "gauge", "Seconds from that time to the end of the last run.",
                       [("", number(max(0, m.end - confirmed)))])
            }
        }
        return out
    }

    /// Renders `m` and replaces the file at `path` atomically, carrying over the count of runs
    /// that found the lock held. A run that found it held (`m.result == .locked`) changes only that
    /// count and leaves the last real run's metrics as they were: an alert on "no successful run
    /// for 2 h" must not fire because cron started a run while a long one was still going.
    public static func write(_ m: RunMetrics, to path: String) throws {
        let (folder, name) = try openParentFolder(of: path)
        defer { folder.close() }
        let previous = readExisting(folder, name)
        var lockedRuns = previous.flatMap(lockedRunCount) ?? 0
        var m = m
        if m.lastSuccess == nil { m.lastSuccess = previous.flatMap { value(of: lastSuccessMetric, in: $0) } }
        var text: String
        if m.result == .locked, let previous {
            lockedRuns += 1
            text = previous.split(separator: "\n", omittingEmptySubsequences: false)
                .filter { !$0.contains("mirror_\(lockedMetric)") }.joined(separator: "\n")
            if !text.isEmpty && !text.hasSuffix("\n") { text += "\n" }
        } else {
            if m.result == .locked { lockedRuns += 1 }
            text = render(m)
        }
        text += "# HELP mirror_\(lockedMetric) Sync runs that ended at once because another run held the destination's lock.\n"
            + "# TYPE mirror_\(lockedMetric) counter\nmirror_\(lockedMetric){\(labels(m))} \(lockedRuns)\n"
        try replaceFileAtomically(folder: folder, name: name, bytes: Array(text.utf8))
    }

    static let lockedMetric = "locked_runs_total"
    static let lastSuccessMetric = "last_success_timestamp_seconds"

    /// Every sample's labels: the manifest (user-info masked) and the destination when known.
    static func labels(_ m: RunMetrics) -> String {
        var labels = "manifest=\(labelValue(redactedURL(m.manifest)))"
        if let dest = m.destination { labels += ",dest=\(labelValue(dest))" }
        return labels
    }

    /// The metrics file as it is, if it is a regular file of reasonable size (read through the
    /// folder's descriptor, never following a link).
    private static func readExisting(_ folder: FileDescriptor, _ name: String) -> String? {
        let fd = openat(folder.fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        let file = FileDescriptor(fd: fd, displayPath: name)
        defer { file.close() }
        guard let status = try? file.stat(), status.isRegularFile, status.size < 1 << 20,
              let bytes = try? file.readAll() else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The value of the locked-runs counter in an earlier file.
    static func lockedRunCount(_ text: String) -> Int? {
        value(of: lockedMetric, in: text).map { Int($0) }
    }

    /// The value of the first sample of `mirror_<metric>` in an earlier file.
    static func value(of metric: String, in text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix("mirror_\(metric){") {
            if let value = line.split(separator: " ").last, let n = Double(value) { return n }
        }
        return nil
    }

    /// A label value in double quotes with `\`, `"` and line feeds escaped (exposition format).
    static func labelValue(_ s: String) -> String {
        var out = "\""
        for c in s {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n", "\r\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out + "\""
    }

    /// Seconds with millisecond precision, without an exponent (`1763780645.123`).
    static func number(_ value: Double) -> String {
        let millis = Int64((value * 1000).rounded())
        let whole = millis / 1000, fraction = abs(millis % 1000)
        let digits = String(fraction)
        return "\(whole).\(String(repeating: "0", count: 3 - digits.count))\(digits)"
    }
}
