#if canImport(Glibc)
import Glibc
#endif

/// Hashes a file that is already on disk, for entries the journal cannot vouch for.
public enum FileHashing {
    /// The digests `entry` lists, of the whole file, read sequentially in 1 MiB blocks.
    /// `progress`, when given, is called with the size of each block read (for `mirror verify`'s display).
    public static func digests(of file: FileDescriptor, for entry: ManifestEntry,
                               progress: (Int) -> Void = { _ in }) throws -> (sha256: Digest?, sha512: Digest?) {
        // Each digest costs a full pass of the CPU over the bytes: only those the entry lists.
        let h256 = entry.sha256 != nil ? Hasher(.sha256) : nil
        let h512 = entry.sha512 != nil ? Hasher(.sha512) : nil
        try read(file, into: [h256, h512].compactMap { $0 }, progress: progress)
        return (h256?.finalize(), h512?.finalize())
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
    public static func matches(_ entry: ManifestEntry, sha256: Digest?, sha512: Digest?) -> Bool {
        (entry.sha256 == nil || entry.sha256 == sha256) && (entry.sha512 == nil || entry.sha512 == sha512)
    }

    /// `expected sha256 3b1f..., got 77aa...`, naming the algorithm that failed.
    public static func mismatchDescription(_ entry: ManifestEntry, sha256: Digest?, sha512: Digest?) -> String {
        if let expected = entry.sha256, expected != sha256 {
            return "expected sha256 \(expected.hex), got \(sha256?.hex ?? "-")"
        }
        return "expected sha512 \(entry.sha512?.hex ?? "-"), got \(sha512?.hex ?? "-")"
    }
}
