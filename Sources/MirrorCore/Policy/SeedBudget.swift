/// Which `--seed` files are hashed for an entry, and how many: a pure value (docs/cli.md, "Reuse by
/// content").
///
/// Why a bound: a seed file is a candidate only by its size, and a seed of many files of one size
/// (a folder of disk images, of fixed-size blocks) would otherwise have every entry of that size
/// read all of them before its download starts. Hashing a candidate reads as many bytes as the
/// download would fetch, so at most ``hashesPerEntry`` candidates keep the cost of a seed to a
/// small multiple of the entry's size, read locally; a file hashed once is remembered for the run
/// and compared again for free, so the run as a whole also reads each seed file at most once.
///
/// Why this order: a seed is most often an old copy of the same tree (a USB disk, last year's
/// mirror), where the entry's bytes sit at its own path, or at least under its own file name. Those
/// are tried first; then the other files of its size, by path (bytes compared), so that a run is
/// repeatable whatever order `readdir` gives.
struct SeedBudget: Equatable, Sendable {
    /// Seed files hashed at most for one entry (a file remembered from earlier entries is free).
    var hashesPerEntry: Int

    /// The budget `mirror sync` uses.
    static let standard = SeedBudget(hashesPerEntry: 8)

    /// Whether one more candidate may be hashed for an entry for which `hashed` were.
    func allowsHash(after hashed: Int) -> Bool { hashed < hashesPerEntry }

    /// How close a seed file is to the entry: 0, at the entry's path (relative to its seed
    /// folder); 1, under the entry's file name elsewhere; 2, any other file of its size.
    static func rank(of candidate: [UInt8], for entryPath: [UInt8]) -> Int {
        if candidate == entryPath { return 0 }
        return lastComponent(of: candidate).elementsEqual(lastComponent(of: entryPath)) ? 1 : 2
    }

    /// The order in which `candidates` (paths relative to their seed folder, all of the entry's
    /// size) are tried for `entryPath`: by ``rank(of:for:)``, then by path bytes; indices into
    /// `candidates`. ``SeedFolders`` keeps its lists in this order without sorting per entry.
    static func order(_ candidates: [[UInt8]], for entryPath: [UInt8]) -> [Int] {
        candidates.indices.sorted { a, b in
            let (ra, rb) = (rank(of: candidates[a], for: entryPath), rank(of: candidates[b], for: entryPath))
            if ra != rb { return ra < rb }
            return candidates[a].lexicographicallyPrecedes(candidates[b])
        }
    }

    /// The bytes after the last `/` (the whole path when it has none).
    static func lastComponent(of path: [UInt8]) -> ArraySlice<UInt8> {
        path.lastIndex(of: UInt8(ascii: "/")).map { path[($0 + 1)...] } ?? path[...]
    }
}
