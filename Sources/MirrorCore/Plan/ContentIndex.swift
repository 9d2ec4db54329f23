import MirrorFS
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// Where on this machine the bytes of an entry may already be (docs/cli.md, "Reuse by content"),
/// so that a renamed or duplicated file, or one a `--seed` folder holds, costs no download:
///
/// - a file in DEST that the journal verified with the same size and digests, still unchanged
///   (its record matches one `stat`): the journal indexed by content;
/// - a file of the same size in a `--seed` folder (a USB disk, an old tree, a neighbour's share),
///   read beneath the folder without following a link, hashed when first asked for, within
///   ``SeedBudget``, and remembered for the run (``SeedFolders``).
///
/// The journal is asked by size and digests (``Journal/verifiedRecords(size:digests:)``): a pass
/// over its records for the first few questions, then its table of contents, made once: a run
/// that downloads nothing or a few files never makes it, and one that does decodes only the
/// records with the content asked for.
/// A candidate is only a guess: what is copied is verified like a download.
final class ContentIndex {
    struct Key: Hashable {
        var size: Int64
        var digests: PerAlgorithm<String>
    }

    /// A file to copy from, opened (never through a symlink) and described for the output.
    struct Source {
        let file: FileDescriptor
        let display: String
    }

    /// DEST's journal; nil for a dry run of a DEST that has none (only seeds can help then).
    private let journal: Journal?
    /// DEST (for an atomic DEST, the building folder, then the set it shows).
    private let destinations: [Destination]
    /// The `--seed` folders, opened once; the chunk delta asks them for an older copy too.
    let seeds: SeedFolders
    /// Files this run installed, by content (the journal's table holds the files verified before).
    private var installed: [Key: [VerifiedRecord]] = [:]

    init(journal: Journal?, destinations: [Destination], seeds: [String]) {
        self.journal = journal
        self.destinations = destinations
        self.seeds = SeedFolders(paths: seeds)
    }

    /// An unchanged file in DEST, else a seed file, whose bytes should be `entry`'s; nil when none.
    /// `seeds`: false asks DEST alone (the dry run, for an entry that another entry of the run
    /// would fetch first and whose file then comes before any seed).
    func source(for entry: ManifestEntry, seeds askSeeds: Bool = true) -> Source? {
        // Picked by a hash of size and digests, so compared exactly before anything is offered.
        let known = journal?.verifiedRecords(size: entry.size, digests: entry.digests) ?? []
        // The exact key (digests as the journal writes them) only when some file may hold the
        // content: most entries of a first sync have none, and it is two strings an entry.
        if !known.isEmpty || !installed.isEmpty {
            let key = Key(size: entry.size, digests: entry.digests.mapValues(\.hex))
            let candidates = known.filter { Key(size: $0.identity.size, digests: $0.identity.digests) == key }
                + (installed[key] ?? [])
            for record in candidates where !record.identity.path.utf8.elementsEqual(entry.path.utf8) {
                for destination in destinations {
                    guard let status = try? destination.status(of: record.identity.path), record.matches(status),
                          let file = try? destination.openForReading(record.identity.path) else { continue }
                    return Source(file: file, display: destination.display(record.identity.path))
                }
            }
        }
        return askSeeds ? seedSource(for: entry) : nil
    }

    /// A file this run installed (and journaled as verified): a source for the entries that
    /// wait for its content (``SyncRunner``'s same-run duplicates).
    func add(_ record: VerifiedRecord) {
        installed[Key(size: record.identity.size, digests: record.identity.digests), default: []].append(record)
    }

    private func seedSource(for entry: ManifestEntry) -> Source? {
        guard let found = seeds.source(for: entry) else { return nil }
        return Source(file: found.file, display: found.display)
    }
}
