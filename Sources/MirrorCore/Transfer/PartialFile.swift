#if canImport(Glibc)
import Glibc
#endif

/// A download in progress: `DEST/.mirror/partial/<name>`, where the bytes from the socket land.
///
/// Every byte written is hashed in the same pass, so when the last byte arrives the checksum is
/// already known (a resumed file's prefix is hashed once, before the transfer resumes). Progress
/// becomes durable in checkpoints: `fdatasync` the file, then journal the length (journal.md,
/// rule 1). The file is touched by one thread at a time: the transfer thread while an attempt runs,
/// the sync thread between attempts (the hand-over goes through the engine's lock).
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
    private let sha256: Hasher?
    private let sha512: Hasher?

    /// Bytes written and hashed: the file's content is `[0, length)`.
    public private(set) var length: Int64 = 0
    /// Bytes the journal records as durable.
    public private(set) var durableLength: Int64 = 0
    /// Where the bytes came from, and the server's validator for them (for `If-Range`).
    public var sourceURL: String?
    public var validator: String?
    /// Body bytes received from the network for this file in this run (for the summary).
    public private(set) var bytesReceived: Int64 = 0

    /// The partial file's name for an entry path: a hash, so any UTF-8 path maps to a short, safe name.
    public static func name(for path: String) -> String {
        String(Hasher.digest(.sha256, of: Array(path.utf8)).hex.prefix(32)) + ".part"
    }

    /// Opens (or creates, mode 0600: unverified bytes are nobody's business) the partial file.
    ///
    /// - Parameter resumeFrom: bytes of an earlier run to keep; they are re-read and hashed now,
    ///   and anything past them is cut off (it was never recorded durable, so it is not trusted).
    public init(identity: EntryIdentity, folder: FileDescriptor, folderDisplay: String,
                journal: Journal?, resumeFrom: Int64 = 0) throws {
        self.identity = identity
        self.folder = folder
        self.journal = journal
        name = PartialFile.name(for: identity.path)
        displayPath = folderDisplay + "/" + name
        // Only the digests the manifest lists are computed: each costs a full pass over the bytes.
        sha256 = identity.sha256 != nil ? Hasher(.sha256) : nil
        sha512 = identity.sha512 != nil ? Hasher(.sha512) : nil
        let fd = openat(folder.fd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd < 0 { throw SystemError("create partial file", displayPath) }
        file = FileDescriptor(fd: fd, displayPath: displayPath)
        let st = try file.stat()
        guard st.isRegularFile else { throw SystemError("use partial file", displayPath, code: EINVAL) }
        let keep = max(0, min(resumeFrom, st.size, identity.size))
        if st.size != keep { try file.truncate(to: keep) }
        if keep > 0 { try hashExisting(keep) }
        length = keep
        durableLength = keep
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

    /// Appends bytes from the network at ``length`` and hashes them; checkpoints every
    /// ``checkpointInterval`` bytes.
    func append(_ bytes: UnsafeRawBufferPointer) throws {
        try file.write(bytes, at: length)
        sha256?.update(bytes)
        sha512?.update(bytes)
        length += Int64(bytes.count)
        bytesReceived += Int64(bytes.count)
        if length - durableLength >= PartialFile.checkpointInterval { try checkpoint() }
    }

    /// Makes the bytes so far durable, then records their length (journal.md, rule 1).
    public func checkpoint() throws {
        guard length != durableLength, let journal, let url = sourceURL else { return }
        try file.syncData()
        CrashPoint.hit("checkpoint-before-record")
        try journal.append(.partial(PartialRecord(identity: identity, url: redactedURL(url), validator: validator, bytes: length)), durable: true)
        durableLength = length
    }

    /// Throws away everything: the server sent the whole file again, or the copy failed its checksum.
    func restartFromZero() throws {
        try file.truncate(to: 0)
        sha256?.reset()
        sha512?.reset()
        if durableLength > 0 {
            try journal?.append(.forget(path: identity.path), durable: false)
        }
        length = 0
        durableLength = 0
        validator = nil
    }

    /// The digests of the whole file. Call once, when ``length`` equals the entry's size.
    public func finishDigests() -> (sha256: Digest?, sha512: Digest?) {
        (sha256?.finalize(), sha512?.finalize())
    }

    /// Prepares a verified file for installation: permission bits, modification time, then `fsync`
    /// so that data and metadata are on disk before the rename makes the file visible.
    public func seal(mode: UInt32, mtime: FileTime?) throws {
        if fchmod(file.fd, mode_t(mode)) != 0 { throw SystemError("set permissions of", displayPath) }
        if let mtime {
            var times = [timespec(tv_sec: 0, tv_nsec: PartialFile.utimeOmit),
                         timespec(tv_sec: Int(mtime.seconds), tv_nsec: Int(mtime.nanoseconds))]
            if futimens(file.fd, &times) != 0 { throw SystemError("set modification time of", displayPath) }
        }
        try file.sync()
    }

    /// Deletes the partial file (after a checksum mismatch, or once it was renamed it is gone anyway).
    public func remove() {
        _ = unlinkat(folder.fd, name, 0)
        file.close()
    }

    public func close() { file.close() }

    /// `UTIME_OMIT` from <sys/stat.h> (a macro Swift does not import): leave the access time alone.
    static let utimeOmit = (1 << 30) - 2
}
