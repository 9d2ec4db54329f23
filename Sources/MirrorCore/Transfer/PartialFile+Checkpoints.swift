import MirrorFS
import MirrorKit
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// What the attempt's side hands the digest side (``PartialDigest``): bytes read back from the
/// file to be hashed, and durable checkpoints, queued on the ``PartialWriter`` (or done at once
/// on the calling thread when there is none); and restarts, which wait for the writer first.
extension PartialFile {
    /// Hands the written bytes that continue the hashed prefix to the hashers, read back from the
    /// file (``HashFeed/readBack(over:all:)``): with `all`, whatever there is; otherwise, while a
    /// kept prefix is hashed again, only in large steps.
    func feedFromFile(_ state: inout Attempt, all: Bool) {
        guard let range = state.feed.readBack(over: state.segments, all: all) else { return }
        if let writer {
            state.hashesInline = false
            writer.hashFile(digest, from: range.lowerBound, to: range.upperBound)
        } else {
            digest.hashFromFile(from: range.lowerBound, to: range.upperBound)
        }
    }

    /// Makes the bytes so far durable, then records their length (per segment when segmented)
    /// and the hash state.
    public func checkpoint() {
        attempt.withLock { checkpoint(&$0) }
    }

    func checkpoint(_ state: inout Attempt) {
        guard state.acceptedLength != state.lastCheckpoint, let url = state.sourceURL else { return }
        feedFromFile(&state, all: true)
        state.lastCheckpoint = state.acceptedLength
        state.lastCheckpointTime = monotonicSeconds()
        // Every byte in this snapshot was written before the checkpoint is queued, so the
        // writer's fdatasync covers it. One stream is journaled without segments (no `segs=`).
        let snapshot = state.segments.count > 1 ? state.segments.map { journalRecord(of: $0, in: state) } : nil
        if let writer {
            state.hashesInline = false
            writer.checkpoint(digest, url: url, validator: state.validator, segments: snapshot)
        } else {
            digest.checkpoint(url: url, validator: state.validator, segments: snapshot)
        }
    }

    /// Throws away everything: the server sent the whole file again, or the copy failed its checksum.
    /// A segmented download becomes one stream again (the runner may split it anew).
    ///
    /// Waits for the writer first, so that no queued checkpoint records bytes this truncates; then
    /// the journal forgets the old checkpoint (durably) before the file changes: after a power cut
    /// the journal never holds a hash state for bytes that were since replaced.
    func restartFromZero() {
        let digest = drained()
        cut(to: 0, digest)
        digest.restart()
        digest.stops.withLock { $0.wrongPiece = nil }
        attempt.withLock {
            $0.feed = HashFeed()
            $0.validator = nil
        }
    }

    /// The journal forgets the file's record, durably, then the file is cut to `prefix` bytes,
    /// which become one stream of that length with nothing durable yet. Takes the digest side
    /// from ``drained()``.
    func cut(to prefix: Int64, _ digest: PartialDigest) {
        do {
            if let records, digest.durableLength > 0 || records.hasRecord { try records.forget() }
            try file.truncate(to: prefix)
        } catch let error as SystemError {
            digest.fail(error)
        } catch {}
        digest.durableLength = 0
        attempt.withLock {
            $0.isDelta = false
            $0.segments = PartialFile.oneStream(size: identity.size, written: prefix)
            $0.acceptedLength = prefix
            $0.lastCheckpoint = 0
        }
    }
}
