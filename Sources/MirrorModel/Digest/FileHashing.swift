import MirrorFS
#if canImport(Glibc)
import Glibc
#endif

/// Hashes a file that is already on disk, for entries the journal cannot vouch for.
public enum FileHashing {
    /// The digests `entry` lists, of the whole file, read sequentially in 1 MiB blocks.
    /// `progress`, when given, is called with the size of each block read (for `mirror verify`'s display).
    public static func digests(of file: FileDescriptor, for entry: ManifestEntry,
                               progress: (Int) -> Void = { _ in }) throws -> DigestSet {
        let hashers = HasherSet(for: entry.digests)
        try read(file, into: hashers.members, progress: progress)
        return hashers.finalize()
    }

    /// Reads `file` from its start to its end in 1 MiB blocks (`POSIX_FADV_SEQUENTIAL`), feeding
    /// every hasher; returns the number of bytes read.
    @discardableResult
    static func read(_ file: FileDescriptor, into hashers: [Hasher], progress: (Int) -> Void = { _ in }) throws -> Int64 {
        posix_fadvise(file.fd, 0, 0, POSIX_FADV_SEQUENTIAL)
        return try read(file, from: 0, to: nil) { chunk in
            for hasher in hashers { hasher.update(chunk) }
            progress(chunk.count)
        }
    }

    /// The one read-and-hash loop, for files on disk and for the bytes of a partial download read
    /// back from the page cache: `[from, to)` in 1 MiB blocks, each handed to `consume`; with `to`
    /// nil, up to the end of the file. A file that ends before `to` is an error (`EIO`): the bytes
    /// to hash are not there. Returns the offset reached.
    @discardableResult
    package static func read(_ file: FileDescriptor, from: Int64, to end: Int64?,
                     _ consume: (UnsafeRawBufferPointer) -> Void) throws -> Int64 {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var offset = from
        while end.map({ offset < $0 }) ?? true {
            let want = Int(min(Int64(buffer.count), (end ?? Int64.max) - offset))
            let n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: offset)
            if n == 0 {
                guard end == nil else { throw SystemError("read", file.displayPath + " (it ended early)", code: EIO) }
                break
            }
            consume(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            offset += Int64(n)
        }
        return offset
    }

    /// Whether computed digests satisfy an entry: every digest the entry lists must match.
    /// Whether `file` holds the bytes whose digests are `digests` (lowercase hex by algorithm, as
    /// the journal writes them): read whole from offset 0. False when `digests` is empty.
    public static func holds(_ file: FileDescriptor, digests: PerAlgorithm<String>) throws -> Bool {
        guard !digests.isEmpty else { return false }
        let hashers = HasherSet(for: digests)
        _ = try read(file, into: hashers.members)
        let computed = hashers.finalize()
        return digests.allSatisfy { computed[$0.algorithm]?.hex == $0.value }
    }

    public static func matches(_ entry: ManifestEntry, _ computed: DigestSet) -> Bool {
        entry.digests.allSatisfy { computed[$0.algorithm] == $0.value }
    }

    /// `expected sha256 3b1f..., got 77aa...`, naming the first algorithm (in ``DigestAlgorithm``'s
    /// order) whose digest does not match.
    public static func mismatchDescription(_ entry: ManifestEntry, _ computed: DigestSet) -> String {
        // With nothing wrong (callers ask only after a mismatch) it names the last algorithm, as it always has.
        let failed = entry.digests.first { computed[$0.algorithm] != $0.value }?.algorithm
            ?? DigestAlgorithm.allCases.last ?? .sha256
        return "expected \(failed.name) \(entry.digests[failed]?.hex ?? "-"), got \(computed[failed]?.hex ?? "-")"
    }
}
