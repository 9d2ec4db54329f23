import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// A segmented download: ranges of one file fetched at once, each written at its own offset,
/// hashed in file order (bytes that continue the hashed prefix from memory, the others read back
/// once the prefix reaches them), and journaled per segment (docs/journal.md, rule 3).
extension PartialFile {

    /// Splits a download that has not started (``length`` 0, no transfer running) into `count`
    /// ranges of whole MiB (see ``beginSegments(length:)``), and preallocates the file (`posix_fallocate`) so that the segments'
    /// writes land in blocks that exist and a full disk shows now rather than halfway.
    func beginSegments(count: Int) throws {
        guard count > 1 else { return }
        let unit: Int64 = 1 << 20
        try beginSegments(length: max(unit, (identity.size / Int64(count) + unit - 1) / unit * unit))
    }

    /// Splits a download that has not started into ranges of `length` bytes (the last one shorter),
    /// and preallocates the file. Many ranges fetched a few at a time, lowest first, keep the bytes
    /// arriving close to file order, so hashing (in file order) follows the transfer instead of
    /// starting on most of the file once the last byte is in.
    func beginSegments(length: Int64) throws {
        let size = identity.size
        guard length > 0, size > length else { return }
        var list: [Segment] = []
        var start: Int64 = 0
        while start < size {
            let end = min(size, start + length)
            list.append(Segment(start: start, end: end, written: 0, writebackStarted: start))
            start = end
        }
        guard list.count > 1 else { return }
        let result = posix_fallocate(file.fd, 0, off_t(size))
        if result == ENOSPC || result == EDQUOT || result == EROFS || result == EIO {
            throw SystemError("preallocate", displayPath, code: result)
        }
        if result != 0 { try file.truncate(to: size) }  // a filesystem without fallocate
        locked {
            segments = list
            fedLength = 0
        }
    }

    /// The segments still to fetch: index, next offset, and end (exclusive).
    func openSegments() -> [(index: Int, from: Int64, end: Int64)] {
        locked {
            (segments ?? []).enumerated().filter { !$0.element.isComplete }.map { ($0.offset, $0.element.next, $0.element.end) }
        }
    }

    /// Bytes segment `index` still lacks (0 for an unknown segment).
    func segmentRemaining(_ index: Int) -> Int64 {
        locked {
            guard let list = segments, list.indices.contains(index) else { return 0 }
            return list[index].end - list[index].next
        }
    }

    /// Writes bytes from the network at segment `index`'s next offset. Bytes that continue the
    /// prefix queued for hashing are hashed from memory; the others wait in the file until the
    /// prefix reaches them.
    func append(_ bytes: UnsafeRawBufferPointer, segment index: Int) throws {
        if let failure { throw failure }
        lock.lock()
        defer { lock.unlock() }
        guard var segment = segments?[safe: index] else {
            throw SystemError("write segment of", displayPath, code: EINVAL)
        }
        let n = Int64(bytes.count)
        let offset = segment.next
        try file.write(bytes, at: offset)
        if offset == fedLength {
            if let writer { writer.hash(self, bytes) } else { performHash(bytes) }
            fedLength += n
        }
        segment.written += n
        if segment.next - segment.writebackStarted >= 1 << 20 {
            _ = mirror_start_writeback(file.fd, segment.writebackStarted, segment.next - segment.writebackStarted)
            segment.writebackStarted = segment.next
        }
        segments?[index] = segment
        acceptedLength += n
        receivedThisRun += n
        feedFromFile()
        if acceptedLength - lastCheckpoint >= PartialFile.checkpointInterval { checkpointLocked() }
    }

    /// Extends the hashed prefix over bytes already in the file: once a segment is complete, the
    /// next one's written part is read back (from the page cache) and hashed. Called with `lock` held.
    func feedFromFile() {
        guard let list = segments else { return }
        for segment in list where fedLength >= segment.start && fedLength < segment.end {
            if segment.next > fedLength {
                if let writer { writer.hashFile(self, from: fedLength, to: segment.next) } else { performHashFromFile(from: fedLength, to: segment.next) }
                fedLength = segment.next
            }
            if !segment.isComplete { break }
        }
    }

    /// Turns a segmented download into one stream that continues from its contiguous prefix (the
    /// server refused a range, or its answers disagree). No transfer of this file may be running.
    /// The journal first forgets the segments (their bytes past the prefix are about to be
    /// overwritten), the file is cut to the prefix, then the prefix is checkpointed again.
    func abandonSegments() {
        writer?.drain(self)
        guard isSegmented else { return }
        cut(to: locked { fedLength })
        checkpoint()
    }
}
