import MirrorFS
import MirrorKit

/// The `sync --json` object (docs/cli.md, "Output"), printed through ``JSONOutput``.
///
/// Messages (`reason`, `error`) are masked with ``redactingURLs(in:)`` here; `source` is masked
/// where it is made (``redactedURL(_:)``), and paths are left as they are (a path is data, not
/// prose). Terminal controls in any of them are escaped by ``JSONOutput/render(_:)``.
public struct SyncDocument: Codable, Equatable, Sendable {
    public struct Files: Codable, Equatable, Sendable {
        public var total: Int
        /// Includes `checked`.
        public var upToDate: Int
        public var checked: Int
        public var downloaded: Int
        public var replaced: Int
        public var failed: Int
        /// Of `failed`: their server could not be reached.
        public var notReached: Int
        public var pending: Int
        /// Files removed by `--delete`/`--delete-unlisted`; not manifest entries, not in `total`.
        public var deleted: Int
        /// Manifest entries `--include`/`--exclude` left out; not in `total`.
        public var excluded: Int

        enum CodingKeys: String, CodingKey {
            case total, upToDate = "up_to_date", checked, downloaded, replaced, failed, notReached = "not_reached", pending, deleted, excluded
        }
    }

    public struct Changed: Codable, Equatable, Sendable {
        public var path: String
        /// `downloaded`, `replaced` or `deleted`.
        public var action: String
        public var size: Int64
        /// Null for an empty file, which needs no source.
        public var source: OrNull<String>
        /// The file on this machine the bytes were copied from (reuse by content); absent otherwise.
        public var copiedFrom: String?
        /// A chunk delta: the older copy on this machine its unchanged chunks were copied from, and
        /// their bytes (the rest came from `source`); both absent otherwise.
        public var deltaFrom: String?
        public var reusedBytes: Int64?

        enum CodingKeys: String, CodingKey {
            case path, action, size, source, copiedFrom = "copied_from", deltaFrom = "delta_from", reusedBytes = "reused_bytes"
        }
    }

    public struct Failure: Codable, Equatable, Sendable {
        public var path: String
        public var error: String
    }

    /// Partial files of earlier runs this run continued: how many, the bytes they kept, and how
    /// many of those bytes it read back from disk to hash (not covered by a trusted saved hash
    /// state, docs/journal.md rule 8). Absent when the run resumed nothing.
    public struct Resumed: Codable, Equatable, Sendable {
        public var files: Int
        public var bytes: Int64
        public var rehashedBytes: Int64

        enum CodingKeys: String, CodingKey {
            case files, bytes, rehashedBytes = "rehashed_bytes"
        }
    }

    /// What the run's requests saw of the network (``LinkSeen``); absent when no request got a
    /// response. `round_trip_ms`: the shortest wait from a request sent to its first response
    /// byte; `bytes_per_second`: `bytes_transferred` over the time from the first request to the
    /// last end.
    public struct Link: Codable, Equatable, Sendable {
        public var roundTripMs: Double
        public var connections: Int64
        public var bytesPerSecond: Int64

        enum CodingKeys: String, CodingKey {
            case roundTripMs = "round_trip_ms", connections, bytesPerSecond = "bytes_per_second"
        }

        init?(_ link: LinkSeen, bytes: Int64) {
            guard let roundTrip = link.roundTrip else { return nil }
            roundTripMs = (roundTrip * 10_000).rounded() / 10
            connections = link.connections
            let rate = link.bytesPerSecond(bytes) ?? 0
            bytesPerSecond = rate.isFinite && rate < 9e18 ? Int64(rate.rounded()) : 0
        }
    }

    public var result: String
    /// Why an incomplete run stopped, or what ended a run before it could plan; absent otherwise.
    public var reason: String?
    public var files: Files
    public var bytesTransferred: Int64
    public var resumed: Resumed?
    public var link: Link?
    /// The run's duration, to the millisecond.
    public var seconds: Double
    public var changed: [Changed]
    public var failures: [Failure]
    /// `--dry-run` only: absent when there is no plan line.
    public var plan: [String]?
    /// Why deleting was refused (the run fails); absent otherwise.
    public var deletionRefused: String?
    /// Only for a run that ended before it could plan (``earlyEnd(_:temporary:exitCode:)``).
    public var exitCode: Int32?
    /// Where the manifest came from (``ManifestDocument``); absent when no manifest was loaded.
    public var manifest: ManifestDocument?
    /// `--dry-run` only: the plan's totals (``DryRunTotals``).
    public var dryRun: DryRunTotals?
    /// The end of the last run that ended `ok`, this one included: null when none did, or when
    /// the run ended before it could read the journal (the metrics file carries it over then).
    public var lastSuccess: OrNull<MomentDocument>
    /// Only for a run that changed nothing because a rollback holds DEST (``HoldPolicy``).
    public var held: HoldDocument?

    enum CodingKeys: String, CodingKey {
        case result, reason, files, bytesTransferred = "bytes_transferred", resumed, link, seconds, changed, failures, plan
        case deletionRefused = "deletion_refused"
        case exitCode = "exit_code", manifest, lastSuccess = "last_success", dryRun = "dry_run", held
    }

    public init(_ s: SyncSummary) {
        result = s.result.name
        if case .incomplete(let why) = s.result { reason = redactingURLs(in: why) }
        files = Files(total: s.total, upToDate: s.upToDate + s.checked, checked: s.checked, downloaded: s.downloaded,
                      replaced: s.replaced, failed: s.failed, notReached: s.notReached, pending: s.pending, deleted: s.deleted, excluded: s.excluded)
        bytesTransferred = s.bytesTransferred
        link = Link(s.link, bytes: s.bytesTransferred)
        if s.resumedFiles > 0 { resumed = Resumed(files: s.resumedFiles, bytes: s.resumedBytes, rehashedBytes: s.rehashedBytes) }
        seconds = (s.seconds * 1000).rounded() / 1000
        changed = s.results.compactMap { r in
            let action: String
            switch r.outcome {
            case .downloaded: action = "downloaded"
            case .replaced: action = "replaced"
            case .deleted: action = "deleted"
            case .failed: return nil
            }
            return Changed(path: r.path, action: action, size: r.size, source: OrNull(r.source), copiedFrom: r.copiedFrom,
                           deltaFrom: r.deltaFrom, reusedBytes: r.deltaFrom == nil ? nil : r.reusedBytes)
        }
        failures = s.results.compactMap { r in
            guard case .failed(let message) = r.outcome else { return nil }
            return Failure(path: r.path, error: redactingURLs(in: message))
        }
        plan = s.plan.isEmpty ? nil : Array(s.plan)
        deletionRefused = s.deletionRefused
        dryRun = s.dryRun
        manifest = s.manifest.map { ManifestDocument($0, now: currentUnixTime()) }
        lastSuccess = OrNull(s.lastSuccess.map(MomentDocument.init))
        held = s.hold.map(HoldDocument.init)
    }

    /// A run that ended before it could plan (invalid or unreachable manifest, lock held,
    /// destination unwritable): zero counts, `result` "incomplete" when a rerun may succeed
    /// (exit 75) else "failed", the message in `reason`, and the exit code.
    public static func earlyEnd(_ message: String, temporary: Bool, exitCode: Int32) -> SyncDocument {
        var summary = SyncSummary()
        summary.result = temporary ? .incomplete(message) : .failed
        var document = SyncDocument(summary)
        document.reason = redactingURLs(in: message)
        document.exitCode = exitCode
        return document
    }
}

extension SyncSummary {
    /// The `--json` line for this run.
    public var json: String {
        var pieces: [String] = []
        writeJSON { pieces.append($0) }
        return pieces.joined()
    }

    /// ``json``, written to `out` a piece at a time: a dry run's `plan` (10^6 lines, say) is
    /// encoded ``JSONOutput/streamingBatch`` lines at a time, not whole.
    public func writeJSON(to out: (String) throws -> Void) rethrows {
        var summary = self
        summary.plan = []
        var document = SyncDocument(summary)
        guard !plan.isEmpty else { return try out(JSONOutput.render(document)) }
        document.plan = []
        try JSONOutput.write(document, array: SyncDocument.CodingKeys.plan.stringValue, count: plan.count,
                             element: { plan[$0] }, to: out)
    }
}

/// A rollback's hold in `sync --json` (`held`) and `status --json` (`hold`): the generation DEST
/// is held at, the one it was rolled back from, and the SHA-256 of the manifests a sync of which
/// changes nothing (docs/cli.md, "mirror rollback").
public struct HoldDocument: Codable, Equatable, Sendable {
    public var generation: Int
    public var from: Int
    public var manifests: [String]

    public init(_ hold: RollbackHold) {
        generation = hold.generation
        from = hold.from
        manifests = hold.manifests
    }
}
