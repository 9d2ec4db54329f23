import CLinux
import MirrorFS
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// A segmented download: ranges of one file fetched at once, each written at its own offset
/// (``append(_:segment:)``), hashed in file order (``HashFeed``), and journaled per segment
/// (docs/journal.md, rule 3).
extension PartialFile {

    /// Splits a download that has not started (``length`` 0, no transfer running) into `count`
    /// ranges of whole MiB (see ``beginSegments(length:)``).
    func beginSegments(count: Int) throws {
        guard count > 1 else { return }
        let unit: Int64 = 1 << 20
        try beginSegments(length: max(unit, (identity.size / Int64(count) + unit - 1) / unit * unit))
    }

    /// Splits a download that has not started into ranges of `length` bytes (the last one shorter),
    /// and preallocates the file (`posix_fallocate`) so that the segments' writes land in blocks
    /// that exist and a full disk shows now rather than halfway. Many ranges fetched a few at a
    /// time, lowest first, keep the bytes arriving close to file order, so hashing (in file order)
    /// follows the transfer instead of starting on most of the file once the last byte is in.
    func beginSegments(length: Int64) throws {
        let size = identity.size
        guard length > 0, size > length else { return }
        var list: [Segment] = []
        var start: Int64 = 0
        while start < size {
            let end = min(size, start + length)
            list.append(Segment(start: start, end: end, written: 0))
            start = end
        }
        guard list.count > 1 else { return }
        try preallocate()
        attempt.withLock {
            $0.segments = list
            $0.feed = HashFeed()
        }
    }

    /// Gives the file its whole size (`posix_fallocate`), so that writes at any offset land in
    /// blocks that exist and a full disk shows now rather than halfway.
    func preallocate() throws {
        let result = DiskChange.posixFallocate(file.fd, 0, off_t(identity.size))
        if result == ENOSPC || result == EDQUOT || result == EROFS || result == EIO {
            throw SystemError("preallocate", displayPath, code: result)
        }
        if result != 0 { try file.truncate(to: identity.size) }  // a filesystem without fallocate
    }

    /// Continues a segmented download: each segment keeps the durable part the journal recorded,
    /// trimmed to what the file still holds; the hash state is restored if it describes a prefix
    /// of those bytes, and the rest of the contiguous prefix is queued to be hashed from the file.
    /// What a killed run wrote past a segment's durable part stays in the file (it cannot be cut
    /// from the middle) but is neither hashed nor vouched for: the segment's transfer starts at its
    /// durable end and writes over it before the hash reaches it (``HashFeed`` reads a segment
    /// only up to what this run counts as written).
    func resumeSegments(_ recorded: [SegmentRecord], saved: PartialRecord, trusted: Bool, fileSize: Int64) throws {
        let list = recorded.map { r in
            Segment(start: r.start, end: r.end, written: max(0, min(r.done, fileSize - r.start)))
        }
        let trimmed = zip(list, recorded).contains { $0.written != $1.done }
        if fileSize != identity.size { try file.truncate(to: identity.size) }
        let prefix = PartialFile.contiguousPrefix(list)
        var hashed: Int64 = 0
        if trusted, saved.bytes > 0, saved.bytes <= prefix, digest.hashers.restore(saved.hashStates) {
            hashed = saved.bytes
        }
        let total = list.reduce(0) { $0 + $1.written }
        if trimmed || !trusted, let records {
            // The journal must not vouch for bytes the file no longer holds. Without the hash
            // states: the next checkpoint records them again, bound to this file's inode.
            try records.record(url: saved.url, validator: saved.validator, bytes: hashed, segments: list.map(\.record))
        }
        digest.durableLength = total
        digest.hashedLength = hashed
        attempt.withLock { state in
            state.resumedFromSavedState = hashed > 0
            state.segments = list
            restoreOrigins(&state, recorded, url: saved.url)
            state.acceptedLength = total
            state.lastCheckpoint = total
            state.keptAtResume = total
            // Whatever the saved state does not cover is read back: the contiguous prefix past it, and
            // the later segments' bytes once the hash reaches them (SHA-2 takes bytes in file order).
            state.rehashedAtResume = total - hashed
            state.feed = HashFeed(fed: hashed)
            feedFromFile(&state, all: true)
        }
    }

    /// The segments still to fetch: index, next offset, and end (exclusive). None for one stream.
    func openSegments() -> [(index: Int, from: Int64, end: Int64)] {
        attempt.withLock { state in
            guard state.segments.count > 1 else { return [] }
            return state.segments.enumerated().filter { !$0.element.isComplete }.map { ($0.offset, $0.element.next, $0.element.end) }
        }
    }

    /// Bytes segment `index` still lacks (0 for an unknown segment; for one stream, segment 0 is
    /// the whole file).
    func segmentRemaining(_ index: Int) -> Int64 {
        attempt.withLock {
            guard let segment = $0.segments[safe: index] else { return 0 }
            return segment.end - segment.next
        }
    }

    /// Turns a segmented download into one stream that continues from its contiguous prefix (the
    /// server refused a range, or its answers disagree). No transfer of this file may be running.
    /// The journal first forgets the segments (their bytes past the prefix are about to be
    /// overwritten), the file is cut to the prefix, then the prefix is checkpointed again.
    func abandonSegments() {
        let digest = drained()
        guard isSegmented else { return }
        cut(to: attempt.withLock { $0.feed.fed }, digest)
        checkpoint()
    }
}
