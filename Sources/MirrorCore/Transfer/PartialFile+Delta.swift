/// A chunk delta's partial file (docs/cli.md, "Chunk deltas"): the new version laid out as the
/// segments of a ``DeltaPlan``, the local ones filled from an older copy on this machine, the
/// others left for range requests. From here on it is an ordinary segmented download: the same
/// requests with `If-Range`, the same response checks, hashing in file order, and checkpoints
/// that journal each segment's progress (docs/journal.md, rule 3), so a kill resumes it.
extension PartialFile {
    /// Fills a fresh partial file (nothing written yet) from `old` as `plan` says, then
    /// checkpoints: the copied bytes are made durable (`fdatasync`) before the journal records
    /// them, like any other bytes. `url` is the source the missing segments will come from; `stop`
    /// is asked between copies (``StoppedEarly`` is thrown).
    func beginDelta(_ plan: DeltaPlan, from old: FileDescriptor, url: String, stop: () -> Bool = { false }) throws {
        guard length == 0, !isSegmented, plan.segments.last?.end == identity.size else {
            throw SystemError("lay out", displayPath, code: EINVAL)
        }
        try preallocate()
        for copy in plan.copies {
            if stop() { throw StoppedEarly() }
            try LocalCopy.copyRange(from: old, at: copy.from, to: file, at: copy.to, length: copy.length, stop: stop)
        }
        let list = plan.segments.map { Segment(start: $0.start, end: $0.end, written: $0.local ? $0.length : 0) }
        attempt.withLock { state in
            state.isDelta = true
            state.segments = list
            state.feed = HashFeed()
            state.acceptedLength = list.reduce(0) { $0 + $1.written }
            state.sourceURL = url
            state.validator = nil
            checkpoint(&state)
        }
    }
}

import MirrorFS
import MirrorKit
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

extension PartialFile {
    /// The chunks whose bytes in the file are not the index's, as byte ranges (neighbours joined).
    /// Read back in file order (``FileHashing/read(_:from:to:_:)``), after the writer is drained;
    /// for a delta whose whole file failed its digest, to fetch only what is wrong.
    func wrongChunks(_ index: ChunkIndex) throws -> [Range<Int64>] {
        settle()
        guard index.size == identity.size else { return [0 ..< identity.size] }
        var wrong: [Range<Int64>] = []
        let hasher = Hasher(.sha256)
        var chunk = 0
        var chunkStart: Int64 = 0
        var left = index.chunks.first.map { Int64($0.length) } ?? 0
        func finish(at end: Int64) {
            if index.key(ChunkDigest(hasher.finalize().bytes)) != index.chunks[chunk].digest {
                if let last = wrong.last, last.upperBound == chunkStart {
                    wrong[wrong.count - 1] = last.lowerBound ..< end
                } else {
                    wrong.append(chunkStart ..< end)
                }
            }
            hasher.reset()
            chunk += 1
            chunkStart = end
            left = index.chunks[safe: chunk].map { Int64($0.length) } ?? 0
        }
        var offset: Int64 = 0
        try FileHashing.read(file, from: 0, to: identity.size) { buffer in
            var rest = buffer
            while !rest.isEmpty, chunk < index.chunks.count {
                let n = Int(min(Int64(rest.count), left))
                hasher.update(UnsafeRawBufferPointer(rebasing: rest[0 ..< n]))
                left -= Int64(n)
                offset += Int64(n)
                rest = UnsafeRawBufferPointer(rebasing: rest[n...])
                if left == 0 { finish(at: offset) }
            }
        }
        return wrong
    }

    /// Opens the `wrong` ranges of a complete delta again, to be fetched anew, and starts the
    /// hash over from offset 0 (it already took the wrong bytes). The journal first records the
    /// new layout without any hash state, durably: it never vouches for bytes about to be
    /// replaced (docs/journal.md, rule 8).
    func reopen(_ wrong: [Range<Int64>]) throws {
        let digest = drained()
        let size = identity.size
        var list: [Segment] = []
        var at: Int64 = 0
        for range in wrong where range.lowerBound >= at && range.upperBound <= size && !range.isEmpty {
            if range.lowerBound > at { list.append(Segment(start: at, end: range.lowerBound, written: range.lowerBound - at)) }
            list.append(Segment(start: range.lowerBound, end: range.upperBound, written: 0))
            at = range.upperBound
        }
        if at < size { list.append(Segment(start: at, end: size, written: size - at)) }
        let kept = list.reduce(0) { $0 + $1.written }
        // The kept bytes were checkpointed as their ranges finished; made durable again here, so
        // the record below never vouches for bytes still only in the page cache (rule 1).
        try file.syncData()
        if let records, let url = sourceURL {
            try records.record(url: redactedURL(url), validator: validator, bytes: 0, segments: list.count > 1 ? list.map(\.record) : nil)
        }
        digest.restart()
        digest.durableLength = kept
        attempt.withLock {
            $0.segments = list
            $0.feed = HashFeed()
            $0.acceptedLength = kept
            $0.lastCheckpoint = kept
        }
    }
}
