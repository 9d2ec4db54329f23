import CLinux
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A download in progress: `DEST/.mirror/partial/<name>`, where the bytes from the socket land.
///
/// Two sides. The thread running an attempt (the transfer thread inside a libcurl callback, the
/// sync thread between attempts) writes the bytes (``append(_:)``, a `pwrite` into the page
/// cache) and queues them for hashing. The ``PartialWriter`` thread hashes them in order, and at a
/// checkpoint `fdatasync`s the file and then journals its length and hash state (docs/journal.md,
/// rule 1): every byte up to a checkpoint was written before the checkpoint was queued. Writing
/// and hashing thus run on the two cores at once. ``finishDigests()`` waits for the queue before
/// reading the digests. Without a writer (tests), hashing is done at once on the calling thread.
public final class PartialFile {
    /// Bytes between durable checkpoints: a kill loses at most this much progress.
    public static let checkpointInterval: Int64 = 8 << 20

    public let identity: EntryIdentity
    /// File name inside the partial folder.
    public let name: String
    public let displayPath: String
    let file: FileDescriptor
    let folder: FileDescriptor
    let journal: Journal?
    let writer: PartialWriter?
    /// One hasher per digest the manifest lists: each costs a full pass over the bytes.
    let hashers: HasherSet

    /// One range of a segmented download: bytes `[start, end)` of the file, of which
    /// `[start, start + written)` are written (into the page cache; durable at a checkpoint).
    struct Segment: Equatable {
        let start: Int64
        let end: Int64
        var written: Int64
        /// Offset where writeback of this segment was last started (``mirror_start_writeback``).
        var writebackStarted: Int64

        var next: Int64 { start + written }
        var isComplete: Bool { next == end }
    }

    // The attempt's side, guarded by `lock`: the transfer thread appends (to several segments at
    // once when segmented) while the sync thread reads the length or asks for a checkpoint.
    let lock = NSLock()
    /// Bytes accepted (written, or queued to be). One stream: the file's content is `[0, length)`
    /// once drained. Segmented: the sum of the segments' written bytes.
    var acceptedLength: Int64 = 0
    var lastCheckpoint: Int64 = 0
    var receivedThisRun: Int64 = 0
    var currentSourceURL: String?
    var currentValidator: String?
    var writebackStarted: Int64 = 0
    /// nil for one stream. Together the segments cover the whole file, in order.
    var segments: [Segment]?
    /// Segmented: the prefix queued for hashing, always within the written part of the file. Hashing
    /// is in file order, so bytes a later segment wrote before the prefix reached them are hashed when
    /// it does, read back from the page cache (``PartialWriter`` job `hashFile`).
    var fedLength: Int64 = 0
    /// One stream resumed over a prefix that is being hashed again: new bytes are hashed from the
    /// file (up to ``fedLength`` queued so far) instead of from memory.
    var hashingFromFile = false
    /// Whether the prefix of a resumed download was taken from the journal's hash state rather
    /// than read back and hashed.
    public private(set) var resumedFromSavedState = false

    public var length: Int64 { locked { acceptedLength } }
    /// Body bytes received from the network for this file in this run (for the summary).
    public var bytesReceived: Int64 { locked { receivedThisRun } }
    public var isComplete: Bool { length == identity.size }
    public var isSegmented: Bool { locked { segments != nil } }
    /// Where the bytes came from, and the server's validator for them (for `If-Range`).
    public var sourceURL: String? {
        get { locked { currentSourceURL } }
        set { locked { currentSourceURL = newValue } }
    }
    public var validator: String? {
        get { locked { currentValidator } }
        set { locked { currentValidator = newValue } }
    }

    // The writer's side (touched by the attempt's side only after ``PartialWriter/drain(_:)``).
    var hashedLength: Int64 = 0
    /// One stream: the durable prefix. Segmented: the durable bytes of all segments together.
    var durableLength: Int64 = 0
    let errorLock = NSLock()
    var storedError: SystemError?

    @inline(__always)
    func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// The partial file's name for an entry path: a hash, so any UTF-8 path maps to a short, safe name.
    public static func name(for path: String) -> String {
        String(Hasher.digest(.sha256, of: Array(path.utf8)).hex.prefix(32)) + ".part"
    }

    /// Opens (or creates, mode 0600: unverified bytes are nobody's business) the partial file.
    ///
    /// - Parameters:
    ///   - resumeFrom: bytes of an earlier run to keep; anything past them is cut off (it was never
    ///     recorded durable, so it is not trusted).
    ///   - saved: the journal's record for those bytes; when it covers exactly `resumeFrom` bytes
    ///     and carries hash states this libcrypto can restore, the prefix is not read again.
    init(identity: EntryIdentity, folder: FileDescriptor, folderDisplay: String, journal: Journal?,
         writer: PartialWriter? = nil, resumeFrom: Int64 = 0, saved: PartialRecord? = nil) throws {
        self.identity = identity
        self.folder = folder
        self.journal = journal
        self.writer = writer
        name = PartialFile.name(for: identity.path)
        displayPath = folderDisplay + "/" + name
        hashers = HasherSet(for: identity.digests)
        let resuming = resumeFrom > 0 || saved != nil
        if !resuming, let journal, journal.partialRecord(for: identity.path) != nil {
            // A fresh file is about to take this name: the journal must stop vouching for the old
            // one first, durably, or a later run would restore its hash state over these bytes.
            try journal.append(.forget(path: identity.path), durable: true)
        }
        let opened = try PartialFile.open(name, in: folder, displayPath: displayPath, resuming: resuming,
                                          journal: journal, path: identity.path)
        file = opened.file
        let st = try file.stat()
        // The saved hash state is trusted only over the very file it was computed on, unchanged
        // since and nobody else's (PartialRecord.describes); anything else is hashed again.
        let trusted = opened.resumed ? saved.flatMap { $0.describes(st, owner: geteuid()) ? $0 : nil } : nil
        guard opened.resumed else {
            acceptedLength = 0
            return
        }
        if let saved, let recorded = saved.segments {
            try resumeSegments(recorded, saved: saved, trusted: trusted != nil, fileSize: st.size)
            return
        }
        let keep = max(0, min(resumeFrom, st.size, identity.size))
        if let saved, let journal, saved.bytes != keep || trusted == nil {
            // The bytes past `keep` will be fetched again and may differ from those the recorded
            // hash state describes, and a state not bound to this file is worth nothing: the
            // journal must stop vouching before anything changes. The bytes themselves stay
            // resumable: a record without hash states makes the next run hash them again.
            if keep > 0 {
                try journal.append(.partial(PartialRecord(identity: identity, url: saved.url, validator: saved.validator,
                                                          bytes: keep)), durable: true)
            } else {
                try journal.append(.forget(path: identity.path), durable: true)
            }
        }
        if st.size != keep { try file.truncate(to: keep) }
        acceptedLength = keep
        lastCheckpoint = keep
        writebackStarted = keep
        if keep > 0, let trusted, trusted.bytes == keep, restore(trusted) {
            resumedFromSavedState = true
            hashedLength = keep
            durableLength = keep
        } else if keep > 0 {
            // Hash the kept prefix again, from the file, before the bytes that follow it: queued
            // on the writer, so the first new byte is asked for now rather than after the read.
            // Until the hash has caught up, new bytes are hashed from the file too (``append(_:)``),
            // so the transfer never waits for the writer's buffers behind that read.
            durableLength = 0
            lastCheckpoint = 0
            if let writer {
                writer.hashFile(self, from: 0, to: keep)
                fedLength = keep
                hashingFromFile = true
            } else {
                performHashFromFile(from: 0, to: keep)
            }
        }
    }

    /// Continues a segmented download: each segment keeps the durable part the journal recorded,
    /// trimmed to what the file still holds; the hash state is restored if it describes a prefix
    /// of those bytes, and the rest of the contiguous prefix is queued to be hashed from the file.
    func resumeSegments(_ recorded: [SegmentRecord], saved: PartialRecord, trusted: Bool, fileSize: Int64) throws {
        var list: [Segment] = []
        for r in recorded {
            let held = max(0, min(r.done, fileSize - r.start))
            list.append(Segment(start: r.start, end: r.end, written: held, writebackStarted: r.start + held))
        }
        let trimmed = zip(list, recorded).contains { $0.written != $1.done }
        if fileSize != identity.size { try file.truncate(to: identity.size) }
        let prefix = PartialFile.contiguousPrefix(list)
        var hashed: Int64 = 0
        if trusted, saved.bytes > 0, saved.bytes <= prefix, restore(saved) {
            hashed = saved.bytes
            resumedFromSavedState = true
        }
        let total = list.reduce(0) { $0 + $1.written }
        if trimmed || !trusted, let journal {
            // The journal must not vouch for bytes the file no longer holds.
            try journal.append(.partial(PartialRecord(identity: identity, url: saved.url, validator: saved.validator,
                                                      bytes: hashed, hashStates: hashed > 0 ? saved.hashStates : [:],
                                                      segments: list.map(\.record))), durable: true)
        }
        segments = list
        acceptedLength = total
        lastCheckpoint = total
        durableLength = total
        hashedLength = hashed
        fedLength = hashed
        feedFromFile()
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

    func restore(_ saved: PartialRecord) -> Bool {
        hashers.restore(saved.hashStates)
    }

    // MARK: - The attempt's side

    /// A write or sync that failed on the writer thread; the attempt stops at its next byte.
    public var failure: SystemError? {
        errorLock.lock()
        defer { errorLock.unlock() }
        return storedError
    }

    /// Writes bytes from the network at ``length`` and queues them for hashing; checkpoints every
    /// ``checkpointInterval`` bytes.
    func append(_ bytes: UnsafeRawBufferPointer) throws {
        if let failure { throw failure }
        lock.lock()
        defer { lock.unlock() }
        try file.write(bytes, at: acceptedLength)
        if hashingFromFile {
            // Fed from the page cache in 4 MiB steps, after the re-hashed prefix.
            if acceptedLength + Int64(bytes.count) - fedLength >= 4 << 20 { feedStreamFromFile(to: acceptedLength + Int64(bytes.count)) }
        } else if let writer {
            writer.hash(self, bytes)
        } else {
            performHash(bytes)
        }
        acceptedLength += Int64(bytes.count)
        receivedThisRun += Int64(bytes.count)
        if acceptedLength - writebackStarted >= 1 << 20 {
            // Start writing back now, without waiting (best effort), so that the checkpoint's
            // fdatasync finds little left to write instead of stalling on the whole interval.
            _ = mirror_start_writeback(file.fd, writebackStarted, acceptedLength - writebackStarted)
            writebackStarted = acceptedLength
        }
        if acceptedLength - lastCheckpoint >= PartialFile.checkpointInterval { checkpointLocked() }
    }

    // MARK: Checkpoints and restarts

    /// Makes the bytes so far durable, then records their length (per segment when segmented)
    /// and the hash state.
    public func checkpoint() {
        locked { checkpointLocked() }
    }

    func checkpointLocked() {
        guard acceptedLength != lastCheckpoint, let url = currentSourceURL else { return }
        if hashingFromFile { feedStreamFromFile(to: acceptedLength) }
        lastCheckpoint = acceptedLength
        // Every byte in this snapshot was written before the checkpoint is queued, so the
        // writer's fdatasync covers it.
        let snapshot = segments?.map(\.record)
        if let writer {
            writer.checkpoint(self, url: url, validator: currentValidator, segments: snapshot)
        } else {
            performCheckpoint(url: url, validator: currentValidator, segments: snapshot)
        }
    }

    /// Throws away everything: the server sent the whole file again, or the copy failed its checksum.
    /// A segmented download becomes one stream again (the runner may split it anew).
    ///
    /// Waits for the writer first, so that no queued checkpoint records bytes this truncates; then
    /// the journal forgets the old checkpoint (durably) before the file changes: after a power cut
    /// the journal never holds a hash state for bytes that were since replaced.
    func restartFromZero() {
        writer?.drain(self)
        cut(to: 0)
        hashers.reset()
        hashedLength = 0
        locked {
            fedLength = 0
            hashingFromFile = false
            currentValidator = nil
        }
    }

    /// One stream whose prefix is being hashed again from the file: queues `[fedLength, end)` to
    /// be hashed from the file after it. Called with `lock` held; the writer must exist.
    private func feedStreamFromFile(to end: Int64) {
        guard let writer, end > fedLength else { return }
        writer.hashFile(self, from: fedLength, to: end)
        fedLength = end
    }

    /// The journal forgets the file's record, durably, then the file is cut to `prefix` bytes,
    /// which become one stream of that length with nothing durable yet. The writer must be drained.
    func cut(to prefix: Int64) {
        do {
            if let journal, durableLength > 0 || journal.partialRecord(for: identity.path) != nil {
                try journal.append(.forget(path: identity.path), durable: true)
            }
            try file.truncate(to: prefix)
        } catch let error as SystemError {
            fail(error)
        } catch {}
        durableLength = 0
        locked {
            segments = nil
            acceptedLength = prefix
            lastCheckpoint = 0
            writebackStarted = prefix
        }
    }

    /// Waits for the writer, then returns the digests of the whole file. Call once, when
    /// ``isComplete``.
    public func finishDigests() throws -> DigestSet {
        locked { if hashingFromFile { feedStreamFromFile(to: acceptedLength) } }
        writer?.drain(self)
        if let failure { throw failure }
        guard hashedLength == identity.size else {
            throw SystemError("hash", displayPath, code: EIO)
        }
        return hashers.finalize()
    }

    /// Waits until everything queued for this file is done.
    public func settle() { writer?.drain(self) }

    // MARK: - The writer's side

    func performHash(_ bytes: UnsafeRawBufferPointer) {
        hashers.update(bytes)
        hashedLength += Int64(bytes.count)
    }

    /// Hashes `[from, to)` read back from the file: bytes a segment wrote before the hashed prefix
    /// reached them (normally still in the page cache, so this is a copy, not a disk read).
    func performHashFromFile(from: Int64, to: Int64) {
        guard failure == nil, from == hashedLength else {
            if failure == nil { fail(SystemError("hash", displayPath, code: EIO)) }
            return
        }
        do {
            try FileHashing.read(file, from: from, to: to) { performHash($0) }
        } catch let error as SystemError {
            fail(error)
        } catch {
            fail(SystemError("read partial file", displayPath, code: EIO))
        }
    }

    func performCheckpoint(url: String, validator: String?, segments: [SegmentRecord]?) {
        let durable = segments.map { $0.reduce(0) { $0 + $1.done } } ?? hashedLength
        guard failure == nil, durable != durableLength, let journal else { return }
        do {
            // The file's identity before the fdatasync: if nothing changes it after, a later run
            // finds the same change time and may trust the hash state; any later write (ours,
            // after this checkpoint, or anyone's) moves it, and the prefix is hashed again.
            let status = try file.stat()
            try file.syncData()
            CrashPoint.hit("checkpoint-before-record")
            let record = PartialRecord(identity: identity, url: redactedURL(url), validator: validator, bytes: hashedLength,
                                       hashStates: hashers.savedStates(),
                                       segments: segments, fileInode: status.inode, fileChangeTime: status.ctime)
            try journal.append(.partial(record), durable: true)
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

    // MARK: - Installing

    /// Prepares a verified file for installation: permission bits, modification time, then (with
    /// `sync`) `fsync`, so that data and metadata are on disk before the rename makes the file
    /// visible. Without `sync` the caller makes it durable another way (``InstallBatch``'s `syncfs`).
    public func seal(mode: UInt32, mtime: FileTime?, sync: Bool = true) throws {
        if fchmod(file.fd, mode_t(mode)) != 0 { throw SystemError("set permissions of", displayPath) }
        if let mtime {
            var times = [timespec(tv_sec: 0, tv_nsec: PartialFile.utimeOmit),
                         timespec(tv_sec: Int(mtime.seconds), tv_nsec: Int(mtime.nanoseconds))]
            if futimens(file.fd, &times) != 0 { throw SystemError("set modification time of", displayPath) }
        }
        if sync { try file.sync() }
    }

    /// Deletes the partial file (after a checksum mismatch; once renamed it is gone anyway).
    public func remove() {
        _ = unlinkat(folder.fd, name, 0)
        file.close()
    }

    public func close() { file.close() }

    /// `UTIME_OMIT` from <sys/stat.h> (a macro Swift does not import): leave the access time alone.
    static let utimeOmit = (1 << 30) - 2
}

extension PartialFile.Segment {
    var record: SegmentRecord { SegmentRecord(start: start, end: end, done: written) }
}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
