import MirrorKit
import MirrorFS
import MirrorModel

/// The deciding half of a chunk delta (docs/cli.md, "Chunk deltas", steps 1 to 4): whether an
/// entry is synced as a delta, from which older copy, and what it fetches. The run lays out the
/// partial file from what this returns (``EntryWork/startDelta(_:url:)``); the dry run prints and
/// counts the same answer (``FetchRouter``). One decision for both, so that a plan says what the
/// run will do (docs/cli.md, `--dry-run`).
///
/// What it needs from where it runs comes in as closures: the run finds older copies and fetches
/// the index with its task's state (sources, revalidation, the stop); the dry run read-only.
struct DeltaPreparation {
    /// An older version of the entry on this machine, opened (never through a link).
    struct OlderCopy {
        /// Where it was found, in the order looked at (``OlderCopies``).
        enum Place: Equatable { case destination, seed, partial }
        let file: FileDescriptor
        let size: Int64
        let display: String
        let place: Place
    }

    /// A delta worth laying out. `old.file` is open: whoever receives this closes it.
    struct Layout {
        let old: OlderCopy
        let index: ChunkIndex
        let plan: DeltaPlan
        /// Bytes of the chunk index received (the size the manifest gives it).
        let indexBytes: Int64
        /// What the delta costs from the network: its ranges and its index.
        var fetchedBytes: Int64 { plan.remoteBytes + indexBytes }
    }

    /// Why an entry that was tried is downloaded whole after all.
    enum NoDelta: Equatable, CustomStringConvertible {
        /// The older copy is far larger than the new version (``DeltaPolicy/isWorthChunking(oldSize:newSize:)``).
        case farLarger(String)
        /// The index could not be had or used, or the older copy not read.
        case failed(String)
        /// Its ranges and index would cost more than 80 % of the file (``DeltaPlan/isWorthIt(size:indexBytes:fraction:)``).
        case notWorthIt

        var description: String {
            switch self {
            case .farLarger(let old): return "\(old) is far larger than the new version"
            case .failed(let why): return why
            case .notWorthIt: return "its changed ranges and chunk index would be more than 80 % of the file"
            }
        }
    }

    enum Outcome {
        /// Not tried: no chunk index, a resume, an empty file, a `file:` source, or no older copy.
        case notTried
        /// Tried, and downloaded whole. `indexBytes`: what was received of the index on the way
        /// (the run counts it in `bytes_transferred`).
        case whole(NoDelta, indexBytes: Int64)
        case delta(Layout)
        /// The run is ending (signal, deadline) while the delta was prepared.
        case stopped(indexBytes: Int64)
    }

    /// An older copy of the entry (``OlderCopies/find(_:partialName:)``), or nil.
    let olderCopy: (ManifestEntry) -> OlderCopy?
    /// The entry's chunk index, checked against the manifest and the entry (``ChunkIndexFetch``);
    /// throws ``StoppedEarly`` when the run is ending.
    let fetchIndex: (ChunkIndexReference, ManifestEntry) throws -> ChunkIndex
    /// Whether to give up chunking (a signal, the deadline).
    let stop: () -> Bool

    /// Steps 1 to 4 for `entry`, which starts from nothing (`startsFromZero`) or not, and whose
    /// first source is `url`.
    func prepare(_ entry: ManifestEntry, startsFromZero: Bool, url: String) -> Outcome {
        guard DeltaPolicy.mayTry(entry, startsFromZero: startsFromZero, url: url), let reference = entry.chunks,
              let old = olderCopy(entry) else { return .notTried }
        var handedOver = false
        defer { if !handedOver { old.file.close() } }
        guard DeltaPolicy.isWorthChunking(oldSize: old.size, newSize: entry.size) else {
            return .whole(.farLarger(old.display), indexBytes: 0)
        }
        var indexBytes: Int64 = 0
        do {
            let index = try fetchIndex(reference, entry)
            indexBytes = reference.size
            // Only the index's chunks are remembered: memory follows the index, not the old copy.
            // Each old chunk is compared by as many bytes of its digest as the index keeps.
            let wanted = Set(index.chunks.map(\.digest))
            var found: [ChunkDigest: Int64] = [:]
            try Chunker(index.parameters).chunks(of: old.file, size: old.size, stop: stop) { chunk in
                let key = index.key(chunk.digest)
                if wanted.contains(key) && found[key] == nil { found[key] = chunk.offset }
            }
            let plan = DeltaPlan(index: index, found: found)
            guard plan.isWorthIt(size: entry.size, indexBytes: reference.size) else { return .whole(.notWorthIt, indexBytes: indexBytes) }
            handedOver = true
            return .delta(Layout(old: old, index: index, plan: plan, indexBytes: indexBytes))
        } catch is StoppedEarly {
            return .stopped(indexBytes: indexBytes)
        } catch {
            // The index or the old copy: neither is the destination's fault; only the delta is lost.
            return .whole(.failed("\(error)"), indexBytes: indexBytes)
        }
    }
}
