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
/// checkpoint `fdatasync`s the file and then journals its length and hash state (journal.md,
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
    private let folder: FileDescriptor
    private let journal: Journal?
    private let writer: PartialWriter?
    private let sha256: Hasher?
    private let sha512: Hasher?

    // The attempt's side.
    /// Bytes accepted (written, or queued to be): the file's content is `[0, length)` once drained.
    public private(set) var length: Int64 = 0
    private var lastCheckpoint: Int64 = 0
    /// Where the bytes came from, and the server's validator for them (for `If-Range`).
    public var sourceURL: String?
    public var validator: String?
    /// Body bytes received from the network for this file in this run (for the summary).
    public private(set) var bytesReceived: Int64 = 0
    /// Whether the prefix of a resumed download was taken from the journal's hash state rather
    /// than read back and hashed.
    public private(set) var resumedFromSavedState = false

    private var writebackStarted: Int64 = 0

    // The writer's side (touched by the attempt's side only after ``PartialWriter/drain(_:)``).
    private var hashedLength: Int64 = 0
    private var durableLength: Int64 = 0
    private let errorLock = NSLock()
    private var storedError: SystemError?

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
        // Only the digests the manifest lists are computed: each costs a full pass over the bytes.
        sha256 = identity.sha256 != nil ? Hasher(.sha256) : nil
        sha512 = identity.sha512 != nil ? Hasher(.sha512) : nil
        file = try PartialFile.open(name, in: folder, displayPath: displayPath, resuming: resumeFrom > 0 || saved != nil)
        let st = try file.stat()
        let keep = max(0, min(resumeFrom, st.size, identity.size))
        if let saved, let journal, saved.bytes != keep {
            // The bytes past `keep` will be fetched again and may differ from those the recorded
            // hash state describes: the journal must stop vouching for them before they change.
            if keep > 0 {
                try journal.append(.partial(PartialRecord(identity: identity, url: saved.url, validator: saved.validator,
                                                          bytes: keep)), durable: true)
            } else {
                try journal.append(.forget(path: identity.path), durable: true)
            }
        }
        if st.size != keep { try file.truncate(to: keep) }
        if keep > 0 {
            if let saved, saved.bytes == keep, restore(saved) {
                resumedFromSavedState = true
            } else {
                try hashExisting(keep)
            }
        }
        length = keep
        lastCheckpoint = keep
        hashedLength = keep
        durableLength = keep
        writebackStarted = keep
    }

    private func restore(_ saved: PartialRecord) -> Bool {
        let states = [(sha256, saved.sha256State), (sha512, saved.sha512State)]
        for (hasher, state) in states where hasher != nil {
            guard let state, let bytes = Digest(hex: state, byteCount: state.utf8.count / 2)?.bytes,
                  hasher?.restore(bytes) == true else {
                sha256?.reset()
                sha512?.reset()
                return false
            }
        }
        return true
    }

    /// Hashes the first `count` bytes already on disk (the prefix of a resumed download).
    private func hashExisting(_ count: Int64) throws {
        posix_fadvise(file.fd, 0, off_t(count), POSIX_FADV_SEQUENTIAL)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while offset < count {
            let want = Int(min(Int64(buffer.count), count - offset))
            let n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: offset)
            if n == 0 { throw SystemError("read partial file", displayPath, code: EIO) }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            sha256?.update(chunk)
            sha512?.update(chunk)
            offset += Int64(n)
        }
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
        try file.write(bytes, at: length)
        if let writer {
            writer.hash(self, bytes)
        } else {
            performHash(bytes)
        }
        length += Int64(bytes.count)
        bytesReceived += Int64(bytes.count)
        if length - writebackStarted >= 1 << 20 {
            // Start writing back now, without waiting (best effort), so that the checkpoint's
            // fdatasync finds little left to write instead of stalling on the whole interval.
            _ = mirror_start_writeback(file.fd, writebackStarted, length - writebackStarted)
            writebackStarted = length
        }
        if length - lastCheckpoint >= PartialFile.checkpointInterval { checkpoint() }
    }

    /// Makes the bytes so far durable, then records their length and hash state.
    public func checkpoint() {
        guard length != lastCheckpoint, let url = sourceURL else { return }
        lastCheckpoint = length
        if let writer {
            writer.checkpoint(self, url: url, validator: validator)
        } else {
            performCheckpoint(url: url, validator: validator)
        }
    }

    /// Throws away everything: the server sent the whole file again, or the copy failed its checksum.
    ///
    /// Waits for the writer first, so that no queued checkpoint records bytes this truncates; then
    /// the journal forgets the old checkpoint (durably) before the file changes: after a power cut
    /// the journal never holds a hash state for bytes that were since replaced.
    func restartFromZero() {
        writer?.drain(self)
        do {
            if durableLength > 0 { try journal?.append(.forget(path: identity.path), durable: true) }
            try file.truncate(to: 0)
        } catch let error as SystemError {
            fail(error)
        } catch {}
        sha256?.reset()
        sha512?.reset()
        length = 0
        lastCheckpoint = 0
        hashedLength = 0
        durableLength = 0
        writebackStarted = 0
        validator = nil
    }

    /// Waits for the writer, then returns the digests of the whole file. Call once, when
    /// ``length`` equals the entry's size.
    public func finishDigests() throws -> (sha256: Digest?, sha512: Digest?) {
        writer?.drain(self)
        if let failure { throw failure }
        return (sha256?.finalize(), sha512?.finalize())
    }

    /// Waits until everything queued for this file is done.
    public func settle() { writer?.drain(self) }

    // MARK: - The writer's side

    func performHash(_ bytes: UnsafeRawBufferPointer) {
        sha256?.update(bytes)
        sha512?.update(bytes)
        hashedLength += Int64(bytes.count)
    }

    func performCheckpoint(url: String, validator: String?) {
        guard failure == nil, hashedLength != durableLength, let journal else { return }
        do {
            try file.syncData()
            CrashPoint.hit("checkpoint-before-record")
            let record = PartialRecord(identity: identity, url: redactedURL(url), validator: validator, bytes: hashedLength,
                                       sha256State: sha256.map { Digest(bytes: $0.exportState()).hex },
                                       sha512State: sha512.map { Digest(bytes: $0.exportState()).hex })
            try journal.append(.partial(record), durable: true)
            durableLength = hashedLength
        } catch let error as SystemError {
            fail(error)
        } catch {
            fail(SystemError("sync", displayPath, code: EIO))
        }
    }

    private func fail(_ error: SystemError) {
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
