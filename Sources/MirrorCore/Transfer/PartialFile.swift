import CLinux
import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// A download in progress: `DEST/.mirror/partial/<name>`, where the bytes from the socket land.
///
/// One mode: the file is a list of segments that together cover `[0, size)`; a download in one
/// stream is a file with one segment, a segmented one (``beginSegments(length:)``) has several.
/// Two sides, each a type of its own. The attempt's side (``Attempt``, behind one lock): the thread
/// running an attempt (the transfer thread inside a libcurl callback, the sync thread between
/// attempts) writes the bytes (``append(_:segment:)``, a `pwrite` into the page cache) and queues
/// them for hashing as ``HashFeed`` decides. The digest side (``PartialDigest``), the
/// ``PartialWriter`` thread's: it hashes them in file order, and at a checkpoint `fdatasync`s the
/// file and then journals its length and hash state (``PartialJournal``; docs/journal.md, rule 1):
/// every byte up to a checkpoint was written before the checkpoint was queued. Writing and hashing
/// thus run on the two cores at once. The attempt's side reads the digest side only after the
/// writer has done the file's jobs (``drained()``). Without a writer (tests), hashing is done at
/// once on the calling thread.
public final class PartialFile {
    /// Bytes between durable checkpoints: a kill loses at most this much progress...
    public static let checkpointInterval: Int64 = 8 << 20
    /// ...or this many seconds of it, whichever comes first: on a 100 KB/s link 8 MiB is 80 s of
    /// download, lost by every kill and power cut (docs/journal.md, "Checkpoint"). On a fast link
    /// the bytes come first and this never fires. `MIRROR_TEST_CHECKPOINT_SECONDS` sets it for
    /// the tests, which cannot wait 30 s for a state.
    static let checkpointSeconds: Double = getenv("MIRROR_TEST_CHECKPOINT_SECONDS")
        .flatMap { Double(String(cString: $0)) }.map { max(0.01, $0) } ?? 30
    /// A new download of a file this small is hashed by the thread that writes it (``Attempt/hashesInline``).
    static let inlineHashLimit: Int64 = 64 << 10

    public let identity: EntryIdentity
    /// File name inside the partial folder (``PartialNaming``: a file with no name takes it only
    /// if it must be renamed over an existing file).
    public let name: String
    public let displayPath: String
    let file: FileDescriptor
    let folder: FileDescriptor
    /// The file has no name (`O_TMPFILE`, ``PartialNaming``): it is linked to its final path once
    /// verified, and nothing is journaled for it, since no later run can resume it.
    public let isUnnamed: Bool
    /// nil when there is no journal, and for a file with no name.
    let records: PartialJournal?
    let writer: PartialWriter?

    /// One range of the file: bytes `[start, end)`, of which `[start, start + written)` are
    /// written (into the page cache; durable at a checkpoint).
    struct Segment: Equatable {
        let start: Int64
        let end: Int64
        var written: Int64
        /// Offset up to which writeback of this segment was asked for (``startWriteback(from:count:)``,
        /// at once or as a job of the writer thread).
        var writebackStarted: Int64
        /// Where its bytes came from: each request's first offset and URL, in order (a segment
        /// continued on another mirror has two). A wrong piece is laid on these (``PartialFile/rewind(piece:dropping:)``).
        var origins: [Origin] = []

        init(start: Int64, end: Int64, written: Int64) {
            self.start = start
            self.end = end
            self.written = written
            writebackStarted = start + written
        }

        var next: Int64 { start + written }
        var isComplete: Bool { next == end }
    }

    /// The attempt's side: what the thread running an attempt changes (the transfer thread
    /// inside libcurl's callbacks, appending to several segments at once when segmented) and the
    /// sync thread reads or resets between attempts (the length, a checkpoint, a rewind). One
    /// lock for all of it, taken once per piece of a body (``append(_:segment:)``).
    struct Attempt: Sendable {
        /// Bytes accepted (written, or queued to be): the sum of the segments' written bytes.
        var acceptedLength: Int64 = 0
        var lastCheckpoint: Int64 = 0
        /// Monotonic time of the last checkpoint, or of the file's opening (``checkpointSeconds``).
        var lastCheckpointTime = monotonicSeconds()
        var receivedThisRun: Int64 = 0
        var sourceURL: String?
        var validator: String?
        /// The file's segments come from several mirrors at once (``EntryWork/spreads(_:)``): each
        /// mirror's validator is kept apart, by URL, and sent as `If-Range` to it alone.
        var spreadingSources = false
        var mirrorValidators: [String: String] = [:]
        /// Together the segments cover the whole file, in order; one for a single stream.
        var segments: [Segment]
        /// The prefix handed to the hashers, and whether the bytes after it are read back from the file.
        var feed = HashFeed()
        /// Bytes are hashed at once by the thread that appends them instead of being copied and queued
        /// on the writer: for a new download of a small file (``inlineHashLimit``), until anything for
        /// it is queued on the writer (a read-back, a checkpoint), after which the writer keeps the
        /// order. Handing 16 KiB to another thread cost more than hashing it (a copy, a wake-up of the
        /// writer, a wait in ``finishDigests()``: 5000 × 16 KiB spent about as long in those `futex`
        /// calls and context switches as in SHA-256 itself).
        var hashesInline = false
        /// Whether the prefix of a resumed download was taken from the journal's hash state rather
        /// than read back and hashed.
        var resumedFromSavedState = false
        /// Bytes of an earlier run kept at resume, and how many of them are read back to be hashed.
        var keptAtResume: Int64 = 0
        var rehashedAtResume: Int64 = 0
        /// The file was laid out from an older local copy and still holds those bytes.
        var isDelta = false
    }
    let attempt: Locked<Attempt>

    /// The digest side, the writer thread's (``PartialDigest``): the attempt's side reaches it
    /// through ``drained()``, or hashes into it at once, with ``attempt``'s lock held, while
    /// nothing of the file is queued on a writer (``Attempt/hashesInline``, or no writer).
    let digest: PartialDigest

    /// Whether the prefix of a resumed download was taken from the journal's hash state rather
    /// than read back and hashed.
    public var resumedFromSavedState: Bool { attempt.withLock { $0.resumedFromSavedState } }
    /// Bytes of an earlier run this file kept when it was resumed, and how many of them this run
    /// reads back from the file to hash them (those the saved hash state does not cover): what
    /// `sync --json` reports as `resumed` (docs/cli.md). Both 0 for a new file.
    public var keptAtResume: Int64 { attempt.withLock { $0.keptAtResume } }
    public var rehashedAtResume: Int64 { attempt.withLock { $0.rehashedAtResume } }
    /// Whether this run laid the file out from an older local copy (``beginDelta(_:from:url:)``)
    /// and it still holds those bytes (a restart from zero or a fall back to one stream clears it).
    public var isDelta: Bool { attempt.withLock { $0.isDelta } }

    public var length: Int64 { attempt.withLock { $0.acceptedLength } }
    /// Body bytes received from the network for this file in this run (for the summary).
    public var bytesReceived: Int64 { attempt.withLock { $0.receivedThisRun } }
    public var isComplete: Bool { length == identity.size }
    public var isSegmented: Bool { attempt.withLock { $0.segments.count > 1 } }
    /// Where the bytes came from, and the server's validator for them (for `If-Range`).
    public var sourceURL: String? {
        get { attempt.withLock { $0.sourceURL } }
        set { attempt.withLock { $0.sourceURL = newValue } }
    }
    public var validator: String? {
        get { attempt.withLock { $0.validator } }
        set { attempt.withLock { $0.validator = newValue } }
    }
    /// Whether the entry has Metalink piece hashes, checked as the bytes are hashed.
    var checksPieces: Bool { digest.pieceCheck != nil }

    /// The digest side once the writer has done every job queued for this file: the one way the
    /// attempt's side reads or resets it.
    func drained() -> PartialDigest {
        writer?.drain(digest)
        return digest
    }

    /// The partial file's name for an entry path: a hash, so any UTF-8 path maps to a short, safe name.
    public static func name(for path: String) -> String {
        String(Hasher.digest(.sha256, of: Array(path.utf8)).hex.prefix(32)) + ".part"
    }

    /// The segment list of one stream of which `written` bytes are in the file.
    static func oneStream(size: Int64, written: Int64) -> [Segment] {
        [Segment(start: 0, end: size, written: written)]
    }

    /// Opens (or creates, mode 0600: unverified bytes are nobody's business) the partial file.
    ///
    /// - Parameters:
    ///   - resumeFrom: bytes of an earlier run to keep; anything past them is cut off (it was never
    ///     recorded durable, so it is not trusted).
    ///   - saved: the journal's record for those bytes; when it covers exactly `resumeFrom` bytes
    ///     and carries hash states this libcrypto can restore, the prefix is not read again.
    ///   - name: ``name(for:)`` of the path, when the caller has it already.
    ///   - naming: whether a new download may go without a name (``PartialNaming``); nil: never.
    init(identity: EntryIdentity, name knownName: String? = nil, folder: FileDescriptor, folderDisplay: String, journal: JournalWriter?,
         writer: PartialWriter? = nil, resumeFrom: Int64 = 0, saved: PartialRecord? = nil, naming: PartialNaming? = nil,
         pieces: PieceHashes? = nil) throws {
        self.identity = identity
        self.folder = folder
        let records = journal.map { PartialJournal(writer: $0, identity: identity) }
        self.writer = writer
        name = knownName ?? PartialFile.name(for: identity.path)
        displayPath = folderDisplay + "/" + name
        let resuming = resumeFrom > 0 || saved != nil
        // A fresh file is about to take this name: the journal must stop vouching for the old
        // one first, durably, or a later run would restore its hash state over these bytes.
        // A file with no name too: the old named file stays until the sweep at the end of the
        // run, and no later run may resume it.
        if !resuming { try records?.forgetIfRecorded() }
        let unnamed = naming?.unnamed(size: identity.size, resuming: resuming) ?? false
        let opened = try PartialFile.open(name, in: folder, displayPath: displayPath, resuming: resuming,
                                          unnamed: unnamed, records: records)
        file = opened.file
        isUnnamed = opened.unnamed
        self.records = opened.unnamed ? nil : records
        digest = PartialDigest(file: opened.file, displayPath: displayPath, records: self.records,
                               hashers: HasherSet(for: identity.digests),
                               pieceCheck: pieces.flatMap { PieceCheck($0, size: identity.size, from: 0) })
        var start = Attempt(segments: PartialFile.oneStream(size: identity.size, written: 0))
        start.hashesInline = writer != nil && !opened.resumed && identity.size <= PartialFile.inlineHashLimit
        attempt = Locked(start)
        guard opened.resumed else { return }
        defer { digest.pieceCheck?.restart(at: digest.hashedLength) }
        let st = try file.stat()
        // The saved hash state is trusted only over the very file it was computed on, still this
        // user's 0600 file with one name and at least as long (PartialRecord.describes); bytes
        // past it are cut below, anything else is hashed again, and the final digest checks all.
        let trusted = saved.flatMap { $0.describes(st, owner: geteuid()) ? $0 : nil }
        if let saved, let recorded = saved.segments {
            try resumeSegments(recorded, saved: saved, trusted: trusted != nil, fileSize: st.size)
        } else {
            try resumeStream(from: resumeFrom, saved: saved, trusted: trusted, fileSize: st.size)
        }
    }

    /// Continues one stream: keeps the first `resumeFrom` bytes the file still holds and cuts the
    /// rest (`ftruncate`: what a killed run wrote past its last checkpoint was never durable, so
    /// it is fetched again); restores the hash state if it describes exactly those bytes, else
    /// hashes them again. Called from `init`, before any writer job of the file.
    private func resumeStream(from resumeFrom: Int64, saved: PartialRecord?, trusted: PartialRecord?, fileSize: Int64) throws {
        let keep = max(0, min(resumeFrom, fileSize, identity.size))
        if let saved, let records, saved.bytes != keep || trusted == nil {
            // The bytes past `keep` will be fetched again and may differ from those the recorded
            // hash state describes, and a state not bound to this file is worth nothing: the
            // journal must stop vouching before anything changes. The bytes themselves stay
            // resumable: a record without hash states makes the next run hash them again.
            if keep > 0 {
                try records.record(url: saved.url, validator: saved.validator, bytes: keep)
            } else {
                try records.forget()
            }
        }
        if fileSize != keep { try file.truncate(to: keep) }
        let restored = keep > 0 && trusted?.bytes == keep && digest.hashers.restore(trusted?.hashStates ?? [:])
        if restored {
            digest.hashedLength = keep
            digest.durableLength = keep
        }
        attempt.withLock { state in
            state.segments = PartialFile.oneStream(size: identity.size, written: keep)
            if let saved { restoreOrigins(&state, nil, url: saved.url) }
            state.acceptedLength = keep
            state.lastCheckpoint = keep
            state.keptAtResume = keep
            guard keep > 0 else { return }
            if restored {
                state.resumedFromSavedState = true
                state.feed = HashFeed(fed: keep)
            } else {
                // Hash the kept prefix again, from the file, before the bytes that follow it: queued
                // on the writer, so the first new byte is asked for now rather than after the read.
                // Until the hash has caught up, new bytes are read back from the file too (``HashFeed``),
                // so the transfer never waits for the writer's buffers behind that read.
                state.lastCheckpoint = 0
                state.rehashedAtResume = keep
                state.feed = HashFeed(fed: 0, readingBack: writer != nil)
                feedFromFile(&state, all: true)
            }
        }
    }

    /// Bytes from offset 0 that every segment up to the first incomplete one holds.
    static func contiguousPrefix(_ list: [Segment]) -> Int64 {
        var prefix: Int64 = 0
        for segment in list {
            guard segment.start == prefix else { break }
            prefix = segment.next
            if !segment.isComplete { break }
        }
        return prefix
    }

    // MARK: - The attempt's side

    /// A write or sync that failed on the writer thread; the attempt stops at its next byte.
    public var failure: SystemError? { digest.failure }

    /// Writes bytes from the network at segment `index`'s next offset (segment 0 of one stream:
    /// at ``length``), hands them to the hashers as ``HashFeed`` decides, starts writeback, and
    /// checkpoints every ``checkpointInterval`` bytes or ``checkpointSeconds``.
    func append(_ bytes: UnsafeRawBufferPointer, segment index: Int = 0) throws {
        try throwIfStopped()
        try attempt.withLock { state in
            let n = Int64(bytes.count)
            guard var segment = state.segments[safe: index], n <= segment.end - segment.next else {
                throw SystemError("write segment of", displayPath, code: EINVAL)
            }
            let offset = segment.next
            try file.write(bytes, at: offset)
            if state.feed.takesFromMemory(at: offset, count: n) {
                if let writer, !state.hashesInline { writer.hash(digest, bytes) } else { digest.hash(bytes) }
            }
            segment.written += n
            if segment.next - segment.writebackStarted >= 1 << 20 {
                // Start writing back now, without waiting (best effort), so that the checkpoint's
                // fdatasync finds little left to write instead of stalling on the whole interval;
                // on the writer thread when the file has one (``PartialWriter/startWriteback(_:from:count:)``).
                let (from, count) = (segment.writebackStarted, segment.next - segment.writebackStarted)
                if let writer, !state.hashesInline {
                    writer.startWriteback(digest, from: from, count: count)
                } else {
                    digest.startWriteback(from: from, count: count)
                }
                segment.writebackStarted = segment.next
            }
            state.segments[index] = segment
            state.acceptedLength += n
            state.receivedThisRun += n
            feedFromFile(&state, all: false)
            if state.acceptedLength - state.lastCheckpoint >= PartialFile.checkpointInterval
                || monotonicSeconds() - state.lastCheckpointTime >= PartialFile.checkpointSeconds {
                checkpoint(&state)
            }
        }
    }

    /// Waits for the writer, then returns the digests of the whole file. Call once, when
    /// ``isComplete``.
    public func finishDigests() throws -> DigestSet {
        attempt.withLock { feedFromFile(&$0, all: true) }
        let digest = drained()
        if let failure = digest.failure { throw failure }
        guard digest.hashedLength == identity.size else {
            throw SystemError("hash", displayPath, code: EIO)
        }
        return digest.hashers.finalize()
    }

    /// Waits until everything queued for this file is done.
    public func settle() { _ = drained() }

    /// Deletes the partial file (after a checksum mismatch; once renamed it is gone anyway). A
    /// file with no name goes when its descriptor closes.
    public func remove() {
        if !isUnnamed { _ = DiskChange.unlinkat(folder.fd, name, 0) }
        file.close()
    }

    public func close() { file.close() }
}

extension PartialFile.Segment {
    var record: SegmentRecord { SegmentRecord(start: start, end: end, done: written) }
}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
