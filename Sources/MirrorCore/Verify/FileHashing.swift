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
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while true {
            let n = try file.read(into: buffer, at: offset)
            if n == 0 { break }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            for hasher in hashers { hasher.update(chunk) }
            offset += Int64(n)
            progress(n)
        }
        return offset
    }

    /// Whether computed digests satisfy an entry: every digest the entry lists must match.
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
