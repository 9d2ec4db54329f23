import MirrorKit
import MirrorModel

/// Fetches an entry's chunk index (docs/cli.md, "Chunk deltas", step 2): from its first source
/// that serves it, checked against the manifest (size, SHA-256) and against the entry (same size
/// and SHA-256 of the whole file). The run asks it for a delta it lays out, the dry run for a
/// delta it counts (``DeltaPreparation``); what differs between them (which hosts to skip, what
/// a request carries) comes in as values.
struct ChunkIndexFetch {
    /// The index's URLs in the order to ask them (`--prefer` bases first), without the hosts the
    /// run found unreachable.
    let urls: [String]
    /// The settings of one request at a URL; `revalidate`: ask caches to revalidate.
    let settings: (_ url: String, _ revalidate: Bool) -> TransferSettings
    /// Monotonic time at which the run stops (`--deadline`), if any.
    let deadline: Double?

    /// The index `reference` names, for `entry`. Throws ``DeltaError`` when no source gives the
    /// right one, ``StoppedEarly`` when the run is ending.
    func fetch(_ reference: ChunkIndexReference, for entry: ManifestEntry) throws -> ChunkIndex {
        guard !urls.isEmpty else { throw DeltaError("the manifest has no base_url to fetch its chunk index from") }
        var last = DeltaError("no source")
        // A source whose index is not the manifest's is asked once more, revalidating: a cache
        // may hold the index of the version before a republish (docs/fleet.md).
        for (url, revalidating) in urls.flatMap({ [($0, false), ($0, true)] }) {
            if revalidating && !last.isStale { continue }
            let response: SmallFetch.Response
            do {
                // Bounded in time as well as size: 60 s plus 100 KB/s of index, and the deadline.
                response = try SmallFetch.get(url, validators: nil, limit: Int(clamping: reference.size),
                                              settings: settings(url, revalidating), stopAt: deadline,
                                              timeLimit: 60 + Int(clamping: reference.size / 100_000))
            } catch SmallFetch.Failure.interrupted {
                throw StoppedEarly()
            } catch {
                last = DeltaError("chunk index \(redactedURL(url)): \(error)")
                continue
            }
            guard response.isSuccess else {
                last = DeltaError("chunk index \(redactedURL(url)): HTTP \(response.status)")
                continue
            }
            guard Int64(response.body.count) == reference.size,
                  Hasher.digest(.sha256, of: response.body) == reference.sha256 else {
                last = DeltaError("chunk index \(redactedURL(url)): not the size and sha256 the manifest gives", isStale: !revalidating)
                continue
            }
            let index = try ChunkIndex.parse(response.body)
            guard index.size == entry.size,
                  entry.digests[.sha256].map({ ChunkDigest($0.bytes) == index.fileDigest }) ?? true else {
                throw DeltaError("its chunk index describes another version of the file")
            }
            return index
        }
        throw last
    }
}

/// Why a delta was not used (the entry is then downloaded whole).
struct DeltaError: Error, CustomStringConvertible {
    var description: String
    /// The index served was not the manifest's: a cache may hold an older one.
    var isStale = false
    init(_ description: String, isStale: Bool = false) {
        self.description = description
        self.isStale = isStale
    }
}
