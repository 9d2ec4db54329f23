import MirrorKit
import MirrorModel

/// The `manifest` object of `sync --json` and `status --json` (docs/cli.md, "Where the manifest
/// came from"), and the `last_success` moment beside it: what an admin alerts on when a machine
/// runs on a saved copy with its server down (docs/cli.md, "Where the manifest came from").
public struct ManifestDocument: Codable, Equatable, Sendable {
    /// `file`, `fetched`, `not_modified` or `saved_copy` (``ManifestSource``).
    public var source: String
    public var sha256: OrNull<String>
    public var etag: OrNull<String>
    /// RFC 3339, UTC: when the manifest was last known current (``ManifestProvenance/confirmed``).
    public var confirmed: OrNull<String>
    public var confirmedUnix: OrNull<Int64>
    /// Whole seconds since `confirmed` when the document was made.
    public var ageSeconds: OrNull<Int64>

    enum CodingKeys: String, CodingKey {
        case source, sha256, etag, confirmed, confirmedUnix = "confirmed_unix", ageSeconds = "age_seconds"
    }

    public init(_ p: ManifestProvenance, now: Double) {
        source = p.source.rawValue
        sha256 = OrNull(p.sha256)
        etag = OrNull(p.etag)
        let unix = p.confirmed.map { Int64($0) }
        confirmed = OrNull(unix.map(Formatting.utcTimestamp))
        confirmedUnix = OrNull(unix)
        ageSeconds = OrNull(p.ageSeconds(now: now).map { Int64($0) })
    }
}

/// A moment as `sync --json` and `status --json` give it: RFC 3339 (UTC) and Unix seconds.
public struct MomentDocument: Codable, Equatable, Sendable {
    public var end: String
    public var endUnix: Int64

    enum CodingKeys: String, CodingKey { case end, endUnix = "end_unix" }

    public init(_ unix: Int64) {
        end = Formatting.utcTimestamp(unix)
        endUnix = unix
    }
}

extension ManifestProvenance {
    /// For people (`status`): `saved copy, current as of 2026-11-24T09:00:00Z (3 h ago), sha256 ab12…, ETag "x"`.
    public func describe(now: Double) -> String {
        var text = source.words
        if let confirmed {
            text += source == .file ? ", modified " : ", current as of "
            text += Formatting.utcTimestamp(Int64(confirmed)) + " (\(Formatting.ago(now - confirmed)))"
        }
        if let sha256 { text += ", sha256 \(sha256)" }
        if let etag { text += ", ETag \(etag)" }
        return text
    }
}
