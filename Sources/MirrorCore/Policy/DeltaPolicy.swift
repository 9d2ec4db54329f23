import CLinux
import MirrorFS
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// When a chunk delta is tried, and what stops it: pure decisions, facts in and a verdict out
/// (docs/cli.md, "Chunk deltas").
enum DeltaPolicy {
    /// Only `http://` and `https://` sources: a delta's ranges are range requests, and a `file:`
    /// source is read whole from its start (as ``SegmentPolicy/wantsSegments(size:url:sourceRefusedRanges:)``
    /// knows too).
    static func servesRanges(_ url: String) -> Bool {
        let scheme = url.prefix(8).lowercased()
        return scheme.hasPrefix("http://") || scheme.hasPrefix("https://")
    }

    /// Whether a delta is tried at all for `entry`, before anything is looked for: it names a
    /// chunk index, has bytes, starts from nothing (a resume continues its own partial file), and
    /// its first source serves ranges. The run and the dry run both ask (``DeltaPreparation``).
    static func mayTry(_ entry: ManifestEntry, startsFromZero: Bool, url: String) -> Bool {
        entry.chunks != nil && entry.size > 0 && startsFromZero && servesRanges(url)
    }

    /// An older copy is chunked whole, at about a second a GB on the sync thread; one far larger
    /// than the new version (a 100 GB seed file for a 1 MiB entry) is not its older version.
    static func isWorthChunking(oldSize: Int64, newSize: Int64) -> Bool {
        oldSize <= (newSize > Int64.max / 8 ? Int64.max / 2 : newSize * 4) + (64 << 20)
    }

    /// A failure laying out the partial file that is the destination's (the run stops, exit 73);
    /// any other (reading the old copy) costs only the delta.
    static func isDestinationFull(_ error: SystemError) -> Bool {
        [ENOSPC, EDQUOT, EROFS].contains(error.code)
    }
}
