#if canImport(Glibc)
import Glibc
#endif

/// Chunk deltas, the runner's side (docs/cli.md, "Chunk deltas"). An entry whose manifest entry
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
extension SyncRunner {
    /// Tries the delta for `task` (once per entry); true when its partial file is laid out (or
    /// the run is stopping and the entry was set aside).
    func startDelta(_ task: EntryTask, url: String) -> Bool {
        guard !task.attempt.delta.tried, task.resume == nil, task.resumeOffset == 0, let reference = task.entry.chunks,
              task.entry.size > 0, partialFolder != nil, DeltaPolicy.servesRanges(url) else { return false }
        task.attempt.delta.tried = true
        guard let old = olderCopy(of: task) else { return false }
        defer { old.file.close() }
        let path = task.entry.path
        guard DeltaPolicy.isWorthChunking(oldSize: old.size, newSize: task.entry.size) else {
            report.logLine("info", "\(path): no delta: \(old.display) is far larger than the new version")
            return false
        }
        let plan: DeltaPlan
        let index: ChunkIndex
        do {
            index = try fetchChunkIndex(reference, for: task)
            task.attempt.delta.indexBytes = reference.size
            // Only the index's chunks are remembered: memory follows the index, not the old copy.
            let wanted = Set(index.chunks.map(\.digest))
            var found: [ChunkDigest: Int64] = [:]
            try Chunker(index.parameters).chunks(of: old.file, size: old.size, stop: runIsEnding) { chunk in
                if wanted.contains(chunk.digest) && found[chunk.digest] == nil { found[chunk.digest] = chunk.offset }
            }
            plan = DeltaPlan(index: index, found: found)
        } catch is Chunker.Stopped {
            return setAsideForStop(task)
        } catch {
            // The index or the old copy: neither is the destination's fault; only the delta is lost.
            report.warning("\(path): no delta (\(error)); downloading it whole")
            return false
        }
        guard plan.isWorthIt(size: task.entry.size, indexBytes: reference.size) else { return false }
        do {
            // A fresh partial file: PartialFile's init forgets any record of the name first (rule 8).
            let partial = try openPartial(for: task)
            do {
                try partial.beginDelta(plan, from: old.file, url: url, stop: runIsEnding)
            } catch {
                partial.settle()
                partial.remove()
                throw error
            }
            task.partial = partial
            task.attempt.delta.from = old.display
            task.attempt.delta.reused = plan.localBytes
            task.attempt.delta.index = index
            report.logLine("info", "\(path): delta from \(old.display): \(plan.localBytes) bytes copied, "
                           + "\(plan.remoteBytes) bytes in \(plan.remoteRanges) ranges to fetch")
            return true
        } catch is Chunker.Stopped {
            return setAsideForStop(task)
        } catch let error as SystemError where DeltaPolicy.isDestinationFull(error) {
            stopOrFail(task.entry, error)
            return true
        } catch {
            // A copy that failed on the old copy's side (an expired NFS seed, say) is not the
            // destination's fault either: the entry is downloaded whole.
            report.warning("\(path): no delta from \(old.display) (\(error)); downloading it whole")
            return false
        }
    }

    /// The run is ending (signal, deadline) while a delta was prepared: the entry is set aside
    /// (never promoted again in this run) and counts as not finished; the next run plans it anew.
    /// Nothing was journaled for it.
    private func setAsideForStop(_ task: EntryTask) -> Bool {
        task.partial = nil
        task.notBefore = .infinity
        scheduler.park(task)
        return true
    }

    /// Whether the run got a signal or passed its deadline: a delta being prepared (chunking a
    /// large old copy, copying its chunks, fetching its index) gives up, and no entry starts.
    func runIsEnding() -> Bool {
        StopSignal.received != 0 || scheduler.deadline.map { monotonicSeconds() >= $0 } == true
    }

    /// An older copy of `entry` on this machine: a regular file at its path in DEST, in the
    /// current generation, or under a `--seed` folder, else the partial download of an earlier
    /// version (a run killed before the manifest changed again); never a link. Any of them is only
    /// a base: a chunk is copied from it only when its bytes have the index's digest.
    func olderCopy(of task: EntryTask) -> (file: FileDescriptor, size: Int64, display: String)? {
        if let copy = installedOrSeedCopy(of: task.entry) { return copy }
        guard let partialFolder else { return nil }
        let name = task.partialName
        let fd = SafePath.open(name, beneath: partialFolder.fd, flags: O_RDONLY)
        guard fd >= 0 else { return nil }
        let display = destination.displayState(".mirror/partial/" + name)
        let file = FileDescriptor(fd: fd, displayPath: display)
        // Read now, before the new partial file takes the name (the descriptor keeps the old bytes).
        if let st = try? file.stat(), st.isRegularFile, st.size > 0, st.owner == geteuid() { return (file, st.size, display) }
        file.close()
        return nil
    }

    private func installedOrSeedCopy(of entry: ManifestEntry) -> (file: FileDescriptor, size: Int64, display: String)? {
        for tree in localTrees {
            guard let file = try? tree.openForReading(entry.path) else { continue }
            if let st = try? file.stat(), st.isRegularFile, st.size > 0 { return (file, st.size, tree.display(entry.path)) }
            file.close()
        }
        // Beneath each seed folder's descriptor, never through a link (``SeedFolders``).
        return contentIndex?.seeds.olderCopy(at: entry.path)
    }

    /// The entry's chunk index from its first source that serves it, checked against the
    /// manifest (size, SHA-256) and against the entry (same size and SHA-256 of the whole file).
    func fetchChunkIndex(_ reference: ChunkIndexReference, for task: EntryTask) throws -> ChunkIndex {
        let named = manifest.chunkIndexSources(for: task.entry)
        let urls = options.sourceOrder.sources(forPath: reference.path, manifestSources: named)
        guard !urls.isEmpty else { throw DeltaError("the manifest has no base_url to fetch its chunk index from") }
        var last = DeltaError("no source")
        // A source whose index is not the manifest's is asked once more, revalidating: a cache
        // may hold the index of the version before a republish (docs/fleet.md).
        let attempts = urls.filter { !unreachableHosts.contains(hostKey(of: $0)) }.flatMap { [($0, false), ($0, true)] }
        for (url, revalidating) in attempts {
            if revalidating {
                guard last.isStale else { continue }
                task.history.revalidate(url)
            }
            let response: SmallFetch.Response
            do {
                // Bounded in time as well as size: 60 s plus 100 KB/s of index, and the deadline.
                response = try SmallFetch.get(url, validators: nil, limit: Int(clamping: reference.size),
                                              settings: transferSettings(for: task, url: url, manifestSources: named), stopAt: scheduler.deadline,
                                              timeLimit: 60 + Int(clamping: reference.size / 100_000))
            } catch SmallFetch.Failure.interrupted {
                throw Chunker.Stopped()
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
            guard index.size == task.entry.size,
                  task.entry.digests[.sha256].map({ ChunkDigest($0.bytes) == index.fileDigest }) ?? true else {
                throw DeltaError("its chunk index describes another version of the file")
            }
            return index
        }
        throw last
    }
}

extension SyncRunner {
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
            scheduler.enqueue(task)
            return true
        } catch {
            return false
        }
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
    /// Wrong chunks were fetched again once (``SyncRunner/repairDelta(_:partial:)``).
    var repaired = false

    /// Nothing was tried or recorded (what every entry without a delta has).
    var isUnused: Bool { !tried && from == nil && reused == 0 && indexBytes == 0 && index == nil && !repaired }
}
