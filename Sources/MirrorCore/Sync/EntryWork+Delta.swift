import MirrorFS
import MirrorKit
import MirrorModel

/// Chunk deltas, the entry's side (docs/cli.md, "Chunk deltas"). An entry whose manifest entry
/// names a chunk index, that starts from nothing, and of which this machine holds an older copy
/// (the file at its path in DEST, in the current generation of an atomic DEST, or at the same path
/// under a `--seed` folder) is laid out from that copy, and only the chunks it lacks are fetched:
///
/// 1. the index is fetched (a small blocking request, ``SmallFetch``)
///    and must have the size and SHA-256 the manifest gives, and describe this version of the file;
/// 2. the old copy is chunked with the index's parameters (``Chunker``) and its chunks looked up by digest;
/// 3. ``DeltaPlan`` lays out the new file; if fetching its ranges and the index would cost more than
///    80 % of the file, the entry is downloaded whole instead;
/// 4. ``PartialFile/beginDelta(_:from:url:)`` copies the local chunks and journals them; the missing
///    ranges are then fetched as the segments of a segmented download.
///
/// Any problem on the way (no index, a wrong one, an unreadable old copy) costs only the delta: the
/// entry is downloaded whole, with a note. The whole-file digest is checked as for every download,
/// so a wrong chunk, local or fetched, is never installed: a mismatch fetches the wrong chunks
/// again once (``repairDelta(_:partial:)``), then the whole file.
extension EntryWork {
    /// Tries the delta for `task` (once per entry); true when its partial file is laid out (or
    /// the run is stopping and the entry was set aside). Whether, and from what, is
    /// ``DeltaPreparation``'s decision, the one the dry run prints.
    func startDelta(_ task: EntryTask, url: String) -> Bool {
        let startsFromZero = task.resume == nil && task.resumeOffset == 0
        guard !task.attempt.delta.tried,
              DeltaPolicy.mayTry(task.entry, startsFromZero: startsFromZero, url: url) else { return false }
        task.attempt.delta.tried = true
        let path = task.entry.path
        let layout: DeltaPreparation.Layout
        switch deltaPreparation(for: task).prepare(task.entry, startsFromZero: startsFromZero, url: url) {
        case .notTried:
            return false
        case .stopped(let indexBytes):
            task.attempt.delta.indexBytes = indexBytes
            return setAsideForStop(task)
        case .whole(let why, let indexBytes):
            task.attempt.delta.indexBytes = indexBytes
            switch why {
            case .farLarger: report.logLine("info", "\(path): no delta: \(why)")
            case .failed: report.warning("\(path): no delta (\(why)); downloading it whole")
            case .notWorthIt: break
            }
            return false
        case .delta(let prepared):
            layout = prepared
        }
        let (old, plan) = (layout.old, layout.plan)
        defer { old.file.close() }
        task.attempt.delta.indexBytes = layout.indexBytes
        do {
            // A fresh partial file: PartialFile's init forgets any record of the name first (rule 8).
            let partial = try openPartial(for: task)
            do {
                try partial.beginDelta(plan, from: old.file, url: url, stop: { [stop] in stop.isEnding })
            } catch {
                partial.settle()
                partial.remove()
                throw error
            }
            task.partial = partial
            task.attempt.delta.from = old.display
            task.attempt.delta.reused = plan.localBytes
            task.attempt.delta.index = layout.index
            report.logLine("info", "\(path): delta from \(old.display): \(plan.localBytes) bytes copied, "
                           + "\(plan.remoteBytes) bytes in \(plan.remoteRanges) ranges to fetch")
            return true
        } catch is StoppedEarly {
            return setAsideForStop(task)
        } catch let error as SystemError where DeltaPolicy.isDestinationFull(error) {
            stopOrFail(task, error)
            return true
        } catch {
            // A copy that failed on the old copy's side (an expired NFS seed, say) is not the
            // destination's fault either: the entry is downloaded whole.
            report.warning("\(path): no delta from \(old.display) (\(error)); downloading it whole")
            return false
        }
    }

    /// The delta's decision for `task`, with what the run knows: its older copies, its sources
    /// (hosts found unreachable left out), its revalidations, the stop.
    private func deltaPreparation(for task: EntryTask) -> DeltaPreparation {
        let copies = OlderCopies(trees: place.localTrees, seeds: place.contentIndex.seeds, partialFolder: place.partialFolder,
                                 partialDisplay: { [destination = place.destination] in destination.displayState(".mirror/partial/" + $0) })
        return DeltaPreparation(olderCopy: { copies.find($0, partialName: task.partialName) },
                                fetchIndex: { [unowned self] reference, _ in try fetchChunkIndex(reference, for: task) },
                                stop: { [stop] in stop.isEnding })
    }

    /// The run is ending (signal, deadline) while a delta was prepared: the entry is set aside
    /// (never promoted again in this run) and counts as not finished; the next run plans it anew.
    /// Nothing was journaled for it.
    private func setAsideForStop(_ task: EntryTask) -> Bool {
        task.partial = nil
        emit(.wait(task, until: .infinity))
        return true
    }

    /// The entry's chunk index (``ChunkIndexFetch``) from its sources whose hosts still answer;
    /// a source asked again to revalidate is asked so for the rest of the entry's attempts.
    func fetchChunkIndex(_ reference: ChunkIndexReference, for task: EntryTask) throws -> ChunkIndex {
        let named = manifest.chunkIndexSources(for: task.entry)
        let urls = options.sourceOrder.sources(forPath: reference.path, manifestSources: named)
            .filter { !reachability.isGivenUp($0) }
        let fetch = ChunkIndexFetch(urls: urls, settings: { [unowned self] url, revalidate in
            if revalidate { task.history.revalidate(url) }
            return transferSettings(for: task, url: url, manifestSources: named)
        }, deadline: stop.deadline)
        return try fetch.fetch(reference, for: task.entry)
    }
}

extension EntryWork {
    /// A delta whose whole file failed its digest: its chunks are checked against the index, and
    /// if some are wrong (fetched from a damaged cache, say, or copied from an old copy that
    /// changed meanwhile) only their ranges are fetched again, asking caches to revalidate. Once
    /// per entry; when no chunk is wrong, or the second time, the usual mismatch handling
    /// (``checksumMismatch(_:partial:detail:got:)``) fetches the file whole or fails the entry.
    func repairDelta(_ task: EntryTask, partial: PartialFile) -> Bool {
        guard partial.isDelta, !task.attempt.delta.repaired, let index = task.attempt.delta.index,
              let url = partial.sourceURL else { return false }
        task.attempt.delta.repaired = true
        do {
            let wrong = try partial.wrongChunks(index)
            guard !wrong.isEmpty, wrong.count <= DeltaPlan.maxSegments else { return false }
            try partial.reopen(wrong)
            task.history.revalidate(url)
            // Each range is checked against the chunk index, and the whole file against its
            // digest: it needs no If-Range. The validator held is the stale bytes' (a cache's old
            // object), and with it a cache that revalidates finds the origin's new one different
            // and answers 200 with the whole file (RFC 9110 §13.1.5); without it, 206 with the
            // ranges. The first answer sets the validator the other ranges are compared with.
            partial.validator = nil
            let bytes = wrong.reduce(0) { $0 + $1.count }
            report.warning("\(task.entry.path): \(bytes) bytes of the delta were not the chunk index's; fetching them again")
            emit(.queue(task))
            return true
        } catch {
            return false
        }
    }
}

/// What a chunk delta did for one entry, for the output.
struct DeltaAttempt {
    /// Tried once per entry.
    var tried = false
    /// The older copy the local chunks came from, when a delta was laid out.
    var from: String?
    /// Bytes copied from it.
    var reused: Int64 = 0
    /// Bytes of the chunk index fetched.
    var indexBytes: Int64 = 0
    /// The index, while the entry is in flight: to find wrong chunks if the whole file fails its digest.
    var index: ChunkIndex?
    /// Wrong chunks were fetched again once (``EntryWork/repairDelta(_:partial:)``).
    var repaired = false

    /// Nothing was tried or recorded (what every entry without a delta has).
    var isUnused: Bool { !tried && from == nil && reused == 0 && indexBytes == 0 && index == nil && !repaired }
}
