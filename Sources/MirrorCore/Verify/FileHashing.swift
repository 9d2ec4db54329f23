#if canImport(Glibc)
import Glibc
#endif

/// Hashes a file that is already on disk, for entries the journal cannot vouch for.
public enum FileHashing {
    /// SHA-256 (and SHA-512 when asked) of the whole file, read sequentially in 1 MiB blocks.
    public static func digests(of file: FileDescriptor, sha512: Bool) throws -> (sha256: Digest, sha512: Digest?) {
        let h256 = Hasher(.sha256)
        let h512 = sha512 ? Hasher(.sha512) : nil
        posix_fadvise(file.fd, 0, 0, POSIX_FADV_SEQUENTIAL)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while true {
            let n = try file.read(into: buffer, at: offset)
            if n == 0 { break }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            h256.update(chunk)
            h512?.update(chunk)
            offset += Int64(n)
        }
        return (h256.finalize(), h512?.finalize())
    }

    /// Whether computed digests satisfy an entry: SHA-256 always, SHA-512 when the entry has one.
    public static func matches(_ entry: ManifestEntry, sha256: Digest, sha512: Digest?) -> Bool {
        sha256 == entry.sha256 && (entry.sha512 == nil || entry.sha512 == sha512)
    }

    /// `checksum mismatch (expected sha256 3b1f..., got 77aa...)`, naming the algorithm that failed.
    public static func mismatchDescription(_ entry: ManifestEntry, sha256: Digest, sha512: Digest?) -> String {
        if sha256 != entry.sha256 {
            return "expected sha256 \(entry.sha256.hex), got \(sha256.hex)"
        }
        return "expected sha512 \(entry.sha512?.hex ?? "-"), got \(sha512?.hex ?? "-")"
    }
}
