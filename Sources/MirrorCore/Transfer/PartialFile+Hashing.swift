import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// The writer's side of a partial file: hashing in file order and durable checkpoints, run on the
/// ``PartialWriter`` thread (or at once on the calling thread when there is none).
extension PartialFile {
    /// Hands the written bytes that continue the hashed prefix to the hashers, read back from the
    /// file (``HashFeed/readBack(over:all:)``): with `all`, whatever there is; otherwise, while a
    /// kept prefix is hashed again, only in large steps. Called with `lock` held.
    func feedFromFile(all: Bool) {
        guard let range = feed.readBack(over: segments, all: all) else { return }
        if let writer {
            hashesInline = false
            writer.hashFile(self, from: range.lowerBound, to: range.upperBound)
        } else {
            performHashFromFile(from: range.lowerBound, to: range.upperBound)
        }
    }

    /// Hands bytes that continue the hashed prefix to the hashers, and to the piece check when the
    /// entry has piece hashes. After a wrong piece nothing more is hashed until the sync thread
    /// rewinds the file (``rewind(from:dropping:)``): the hashers stand at the piece's first byte.
    func performHash(_ bytes: UnsafeRawBufferPointer) {
        guard let pieceCheck else {
            hashers.update(bytes)
            hashedLength += Int64(bytes.count)
            return
        }
        guard wrongPiece == nil else { return }
        // Every path that moves the hashed prefix restarts the check with it; should one not, the
        // check picks up at the next piece rather than compare bytes of another place.
        if pieceCheck.next != hashedLength { pieceCheck.restart(at: hashedLength) }
        if let wrong = pieceCheck.feed(bytes, into: hashers) {
            hashedLength = wrong.range.lowerBound
            errorLock.lock()
            storedWrongPiece = wrong
            errorLock.unlock()
        } else {
            hashedLength += Int64(bytes.count)
        }
    }

    /// Hashes `[from, to)` read back from the file (``FileHashing/read(_:from:to:_:)``, the one
    /// read-and-hash loop): a kept prefix hashed again, or bytes a segment wrote before the hashed
    /// prefix reached them (normally still in the page cache, so this is a copy, not a disk read).
    func performHashFromFile(from: Int64, to: Int64) {
        guard wrongPiece == nil else { return }
        guard failure == nil, from == hashedLength else {
            if failure == nil { fail(SystemError("hash", displayPath, code: EIO)) }
            return
        }
        do {
            try FileHashing.read(file, from: from, to: to) { bytes in
                if wrongPiece == nil { performHash(bytes) }
            }
        } catch let error as SystemError {
            fail(error)
        } catch {
            fail(SystemError("read partial file", displayPath, code: EIO))
        }
    }

    /// `fdatasync`, then the journal record (docs/journal.md, rule 1): the hashed prefix with its
    /// hash states and, when segmented, each segment's durable bytes.
    func performCheckpoint(url: String, validator: String?, segments: [SegmentRecord]?) {
        let durable = segments.map { $0.reduce(0) { $0 + $1.done } } ?? hashedLength
        guard failure == nil, durable != durableLength, let records else { return }
        do {
            // The file's inode (and change time) before the fdatasync: a later run restores the
            // hash state only over this inode, still this user's 0600 file with one name and at
            // least this long (PartialRecord.describes), after cutting what follows the checkpoint.
            let status = try file.stat()
            let proof = try file.syncData()
            CrashPoint.hit("checkpoint-before-record")
            try records.checkpoint(url: redactedURL(url), validator: validator, bytes: hashedLength,
                                   states: hashers.savedStates(), segments: segments, status: status, proof: proof)
            durableLength = durable
        } catch let error as SystemError {
            fail(error)
        } catch {
            fail(SystemError("sync", displayPath, code: EIO))
        }
    }

    func fail(_ error: SystemError) {
        errorLock.lock()
        if storedError == nil { storedError = error }
        errorLock.unlock()
    }
}
