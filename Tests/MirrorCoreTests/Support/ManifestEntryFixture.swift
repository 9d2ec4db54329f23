import MirrorModel
import Testing

/// The manifest entries and digests the unit tests make, in one place: every suite that needs an
/// entry builds it here, so that an entry's shape (its url, its digests) is the same everywhere.
extension ManifestEntry {
    /// An entry at `path`, fetched from `path` relative to the base URL, of `size` bytes, listing
    /// the `sha256` and `sha512` digests given (nil: none of that algorithm). The default SHA-256
    /// is a stand-in (every byte 7) for the tests where the bytes do not matter.
    static func fixture(_ path: String, size: Int64 = 10, sha256: Digest? = .filled(7), sha512: Digest? = nil) -> ManifestEntry {
        var digests = DigestSet()
        digests[.sha256] = sha256
        digests[.sha512] = sha512
        return ManifestEntry(path: path, url: .relative(path), size: size, digests: digests)
    }
}

extension Digest {
    /// A digest of `algorithm`'s length whose every byte is `byte`: a stand-in for some content,
    /// where a test only compares digests and never hashes the bytes.
    static func filled(_ byte: UInt8, _ algorithm: DigestAlgorithm = .sha256) -> Digest {
        Digest(bytes: [UInt8](repeating: byte, count: algorithm.byteCount))
    }

    /// The `algorithm` digest that `hex` spells (a file's SHA-256 from ``TestData``); the test
    /// fails here, and this throws, when it is not one.
    static func parsed(_ hex: String, _ algorithm: DigestAlgorithm = .sha256,
                       sourceLocation: SourceLocation = #_sourceLocation) throws -> Digest {
        try #require(Digest(hex: hex, byteCount: algorithm.byteCount), "not a \(algorithm) digest: \(hex)",
                     sourceLocation: sourceLocation)
    }
}
