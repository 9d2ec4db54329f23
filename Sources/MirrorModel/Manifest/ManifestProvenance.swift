import MirrorFS
#if canImport(Glibc)
import Glibc
#endif

/// Where a run's manifest came from, as `--json`, `--metrics-file` and `status` show it
/// (docs/cli.md, "Where the manifest came from").
///
/// With the server down and the saved copy fully synced, a run ends `ok` and exit 0; without
/// these facts a stale machine looked healthy. They let an admin alert on "manifest older than a
/// day" (``ageSeconds(now:)``) separately from "not in sync for 2 h" (the journal's last
/// successful run, `Journal.lastSuccess`).
public enum ManifestSource: String, Sendable, CaseIterable {
    /// A path on the command line, read now.
    case file
    /// Fetched now from its URL (200, or a `file:` URL read now).
    case fetched
    /// The server answered 304: the saved copy is current.
    case notModified = "not_modified"
    /// The server could not be asked (or `status`/`verify`, which never use the network): the
    /// copy kept under `DEST/.mirror/manifest` is used.
    case savedCopy = "saved_copy"

    /// For people: `saved copy`, `not modified`.
    public var words: String { rawValue.replacing("_", with: " ") }
}

public struct ManifestProvenance: Sendable, Equatable {
    public var source: ManifestSource
    /// SHA-256 of the manifest's bytes as served or stored (before any gunzip), lowercase hex.
    public var sha256: String?
    /// The server's `ETag` for those bytes, when it sent one.
    public var etag: String?
    /// Unix time at which the manifest was last known current: fetched, or confirmed by a 304,
    /// now or (for a saved copy) at the last run that could ask; for a file, its modification time.
    public var confirmed: Double?

    public init(source: ManifestSource, sha256: String?, etag: String?, confirmed: Double?) {
        self.source = source
        self.sha256 = sha256
        self.etag = etag
        self.confirmed = confirmed
    }

    /// Seconds since ``confirmed``, never negative (a clock set back); nil when unknown.
    public func ageSeconds(now: Double) -> Double? {
        confirmed.map { max(0, now - $0) }
    }

    /// The manifest file at `path` as it is now: its digest and modification time (`fstat`),
    /// nil when it cannot be read (the load that follows or went before says why). Without
    /// `digest` the file is not read again (only `--json` and `--metrics-file` show the digest,
    /// and hashing a 100,000-entry manifest's 14 MB is 6 % of a no-op run).
    public static func ofFile(_ path: String, digest: Bool = true) -> ManifestProvenance? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        let file = FileDescriptor(fd: fd, displayPath: path)
        defer { file.close() }
        guard let status = try? file.stat(), status.isRegularFile else { return nil }
        guard digest else { return ManifestProvenance(source: .file, sha256: nil, etag: nil, confirmed: Double(status.mtime.seconds)) }
        // A block at a time: this runs after the parse, beside every entry, and reading the
        // whole file here once made a file-sized peak (10^6 entries: 148 MB more).
        // FileHashing's read loop, to the end of the file.
        let hasher = Hasher(.sha256)
        guard (try? FileHashing.read(file, from: 0, to: nil, { hasher.update($0) })) != nil else { return nil }
        return ManifestProvenance(source: .file, sha256: hasher.finalize().hex, etag: nil, confirmed: Double(status.mtime.seconds))
    }
}
