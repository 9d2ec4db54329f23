import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// The digest side of a partial file: the hashers fed in file order, the hashed and durable
/// lengths, the Metalink piece check, and durable checkpoints (`fdatasync`, then the journal
/// record). It is the ``PartialWriter`` thread's: the writer's jobs carry this object, never the
/// ``PartialFile``, so the writer thread cannot reach the attempt's side.
///
/// Who may touch it when: the writer thread runs its jobs; the thread that appends hashes at once
/// instead, with the attempt's lock held, while the file has no writer or hashes inline
/// (``PartialFile/Attempt/hashesInline``) and nothing of it is queued; the attempt's side reads or resets it
/// only through ``PartialFile/drained()``, which waits for the writer to finish the file's jobs
/// first. Only ``stops`` is read while jobs run (every piece of a body asks it), so it alone has a
/// lock.
final class PartialDigest {
    let file: FileDescriptor
    let displayPath: String
    /// nil when there is no journal, and for a file with no name.
    let records: PartialJournal?
    /// One hasher per digest the manifest lists: each costs a full pass over the bytes.
    let hashers: HasherSet
    /// Bytes from offset 0 the hashers took.
    var hashedLength: Int64 = 0
    /// The durable bytes of all segments together (for one stream, the durable prefix).
    var durableLength: Int64 = 0
    /// The Metalink piece hashes checked as the bytes are hashed (``PieceCheck``), if the entry has them.
    let pieceCheck: PieceCheck?

    /// What stops the file's requests at their next byte: a write or sync that failed here, or a
    /// piece that did not match its hash (the sync thread then rewinds the file,
    /// ``PartialFile/rewind(piece:dropping:)``).
    struct Stops: Sendable {
        var error: SystemError?
        var wrongPiece: PieceCheck.WrongPiece?
    }
    /// Written by whichever thread hashes, read by the appending thread at every piece of a body.
    let stops = Locked(Stops())

    init(file: FileDescriptor, displayPath: String, records: PartialJournal?, hashers: HasherSet, pieceCheck: PieceCheck?) {
        self.file = file
        self.displayPath = displayPath
        self.records = records
        self.hashers = hashers
        self.pieceCheck = pieceCheck
    }

    var failure: SystemError? { stops.withLock { $0.error } }
    var wrongPiece: PieceCheck.WrongPiece? { stops.withLock { $0.wrongPiece } }

    /// Hands bytes that continue the hashed prefix to the hashers, and to the piece check when the
    /// entry has piece hashes. After a wrong piece nothing more is hashed until the sync thread
    /// rewinds the file (``PartialFile/rewind(piece:dropping:)``): the hashers stand at the piece's first byte.
    func hash(_ bytes: UnsafeRawBufferPointer) {
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
            stops.withLock { $0.wrongPiece = wrong }
        } else {
            hashedLength += Int64(bytes.count)
        }
    }

    /// Hashes `[from, to)` read back from the file (``FileHashing/read(_:from:to:_:)``, the one
    /// read-and-hash loop): a kept prefix hashed again, or bytes a segment wrote before the hashed
    /// prefix reached them (normally still in the page cache, so this is a copy, not a disk read).
    func hashFromFile(from: Int64, to: Int64) {
        guard wrongPiece == nil else { return }
        guard failure == nil, from == hashedLength else {
            if failure == nil { fail(SystemError("hash", displayPath, code: EIO)) }
            return
        }
        do {
            try FileHashing.read(file, from: from, to: to) { bytes in
                if wrongPiece == nil { hash(bytes) }
            }
        } catch let error as SystemError {
            fail(error)
        } catch {
            fail(SystemError("read partial file", displayPath, code: EIO))
        }
    }

    /// `fdatasync`, then the journal record (docs/journal.md, rule 1): the hashed prefix with its
    /// hash states and, when segmented, each segment's durable bytes.
    func checkpoint(url: String, validator: String?, segments: [SegmentRecord]?) {
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

    /// `sync_file_range(SYNC_FILE_RANGE_WRITE)`: start writing these bytes back, without waiting.
    func startWriteback(from: Int64, count: Int64) {
        _ = DiskChange.startWriteback(file.fd, from, count)
    }

    /// Starts the hash over from offset 0 (the bytes it took are being replaced).
    func restart() {
        hashers.reset()
        hashedLength = 0
        pieceCheck?.restart(at: 0)
    }

    func fail(_ error: SystemError) {
        stops.withLock { if $0.error == nil { $0.error = error } }
    }
}
