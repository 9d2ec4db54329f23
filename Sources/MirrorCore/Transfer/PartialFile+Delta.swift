/// A chunk delta's partial file (docs/cli.md, "Chunk deltas"): the new version laid out as the
/// segments of a ``DeltaPlan``, the local ones filled from an older copy on this machine, the
/// others left for range requests. From here on it is an ordinary segmented download: the same
/// requests with `If-Range`, the same response checks, hashing in file order, and checkpoints
/// that journal each segment's progress (docs/journal.md, rule 3), so a kill resumes it.
extension PartialFile {
    /// Fills a fresh partial file (nothing written yet) from `old` as `plan` says, then
    /// checkpoints: the copied bytes are made durable (`fdatasync`) before the journal records
    /// them, like any other bytes. `url` is the source the missing segments will come from.
    func beginDelta(_ plan: DeltaPlan, from old: FileDescriptor, url: String) throws {
        guard length == 0, !isSegmented, plan.segments.last?.end == identity.size else {
            throw SystemError("lay out", displayPath, code: EINVAL)
        }
        try preallocate()
        for copy in plan.copies {
            try LocalCopy.copyRange(from: old, at: copy.from, to: file, at: copy.to, length: copy.length)
        }
        isDelta = true
        let list = plan.segments.map { Segment(start: $0.start, end: $0.end, written: $0.local ? $0.length : 0) }
        locked {
            segments = list
            feed = HashFeed()
            acceptedLength = list.reduce(0) { $0 + $1.written }
            currentSourceURL = url
            currentValidator = nil
            checkpointLocked()
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
