import MirrorFS
import MirrorKit
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// Whether the manifest a run works from is still the one published (docs/fleet.md, "A republish
/// during a run"). Asked when a file's bytes are not what the manifest says (a checksum mismatch,
/// or a server's validator that changed under a resume): if the administrator republished
/// meanwhile, the server already serves the new version, and fetching the file again, or failing
/// it with "republish the manifest", would cost bytes and a wrong alarm. The entry is then left
/// for the next run, which reads the new manifest (exit 75).
///
/// A manifest URL is asked with a conditional request (`If-None-Match` with the ETag it came with,
/// and `Cache-Control: no-cache` so no cache answers for the origin; RFC 9110 §13.1.2): 304 says
/// unchanged, and a 200 body is compared by SHA-256. A local manifest is compared by its `stat`
/// as the run found it before reading it (inode, size, modification and change time: a publish
/// that renames a new file into place, or rewrites it, changes them), so nothing is hashed. The
/// answer is kept for ``interval`` seconds (a changed one for the rest of the run), so a run whose
/// many files mismatch asks once; an answer that cannot be had (the server down) is "unchanged".
final class ManifestWatch {
    /// Where the manifest was read: its URL, or its path.
    let location: String
    private let read: Read
    private let settings: TransferSettings
    private var askedAt: Double?
    private(set) var changed = false
    static let interval = 30.0

    /// What the run knows of the manifest it read.
    enum Read {
        /// From a URL: the SHA-256 of the bytes fetched (or of the kept copy used) and their ETag.
        case fetched(sha256: String, etag: String?)
        /// From a local file: its status before it was read.
        case file(FileStatus)
    }

    init(location: String, read: Read, settings: TransferSettings) {
        self.location = location
        self.read = read
        self.settings = settings
    }

    /// The status of a local manifest, taken before it is read (`stat(2)`, following links as the
    /// read does); nil when it cannot be had.
    static func status(ofFile path: String) -> FileStatus? {
        var st = stat()
        return stat(path, &st) == 0 ? FileStatus(st) : nil
    }

    /// Whether the published manifest differs from the run's, asking at most once per ``interval``.
    func hasChanged(now: Double, deadline: Double?) -> Bool {
        if changed { return true }
        if let askedAt, now - askedAt < ManifestWatch.interval { return false }
        askedAt = now
        switch read {
        case .file(let before):
            guard let now = ManifestWatch.status(ofFile: location) else { return false }
            changed = !(now.sameFile(as: before) && now.size == before.size && now.mtime == before.mtime && now.ctime == before.ctime)
        case .fetched(let sha256, let etag):
            changed = published(etag: etag).map { $0 != sha256 } ?? false
        }
        return changed
    }

    /// The SHA-256 of the manifest published at the URL now; nil when the server says it is
    /// unchanged (304) or it cannot be told.
    private func published(etag: String?) -> String? {
        let validators = etag.map { SmallFetch.Validators(url: redactedURL(location), etag: $0, lastModified: nil) }
        guard let response = try? SmallFetch.get(location, validators: validators, limit: RemoteManifest.sizeLimit,
                                                 settings: settings, timeLimit: 30, revalidate: true),
              response.status != 304, response.isSuccess else { return nil }
        let hasher = Hasher(.sha256)
        hasher.update(response.body)
        return hasher.finalize().hex
    }
}
