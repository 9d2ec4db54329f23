/// The request headers that make caches on the way fetch the file from its source again instead
/// of serving their stored copy: `Cache-Control: no-cache` (RFC 9111 §5.2.1.4) for HTTP/1.1
/// caches, and `Pragma: no-cache` (RFC 9111 §5.4) for HTTP/1.0 ones. An nginx `proxy_cache`
/// honours neither by itself: docs/fleet.md gives the `proxy_cache_bypass` that makes it fetch
/// and store the file anew, which heals a corrupt entry.
///
/// A file's download sends them only on an attempt that follows a checksum mismatch at the same
/// URL (``MismatchPolicy``): on every request they would defeat the cache that saves the uplink.
/// A remote manifest and its signature send them on every request (``RemoteManifest``): nothing
/// checks a manifest against something older, so a cache that kept one for the 60 days its server
/// allowed would keep every machine on it, each run `ok`; they cost a small request to the origin
/// (a `304` when nothing changed). A chunk index does not need them: the manifest gives its
/// SHA-256, and one that does not match is fetched once more with them.
enum CacheRevalidation {
    static let headerLines = ["Cache-Control: no-cache", "Pragma: no-cache"]

    /// The header lines one request adds: the revalidation headers when `revalidate`, for HTTP(S) only.
    static func headerLines(revalidate: Bool, url: String) -> [String] {
        guard revalidate, !url.lowercased().hasPrefix("file:") else { return [] }
        return headerLines
    }
}
