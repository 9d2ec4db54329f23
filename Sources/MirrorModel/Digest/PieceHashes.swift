import COpenSSL

/// A Metalink file's piece hashes (RFC 5854 §4.1.2.4, `<pieces length="L" type="T">`): a hash of
/// each `length` bytes of the file, the last piece shorter. They let a download tell which mirror
/// sent wrong bytes while the file is still arriving, long before the whole-file digest can.
///
/// They only ever refuse bytes: a piece that matches proves nothing mirror relies on, since every
/// file is still accepted by its whole-file SHA-256 or SHA-512 alone (docs/manifest.md, "Metalink
/// 4"). So a weak type (`sha-1`, common in published Metalink files) is as useful here as a strong
/// one: it points at a bad mirror early, and a collision could at worst hide a bad piece until the
/// whole-file digest refuses the file.
public final class PieceHashes: Sendable, Hashable {
    /// The hash types mirror computes for pieces (libcrypto's EVP digests).
    public enum Kind: String, Sendable, CaseIterable {
        case sha1 = "sha-1", sha256 = "sha-256", sha384 = "sha-384", sha512 = "sha-512"

        /// Bytes in one digest of this type.
        public var byteCount: Int {
            switch self {
            case .sha1: 20
            case .sha256: 32
            case .sha384: 48
            case .sha512: 64
            }
        }
    }

    public let kind: Kind
    /// Bytes per piece (the last may be shorter).
    public let length: Int64
    /// One digest per piece, in file order.
    public let hashes: [[UInt8]]

    public init(kind: Kind, length: Int64, hashes: [[UInt8]]) {
        self.kind = kind
        self.length = length
        self.hashes = hashes
    }

    /// The piece that holds byte `offset` of the file.
    public func index(of offset: Int64) -> Int { Int(offset / length) }

    /// Bytes `[start, end)` of piece `index` in a file of `size` bytes.
    public func range(of index: Int, size: Int64) -> Range<Int64> {
        let start = Int64(index) * length
        return start..<min(size, start + length)
    }

    public static func == (a: PieceHashes, b: PieceHashes) -> Bool {
        a.kind == b.kind && a.length == b.length && a.hashes == b.hashes
    }

    public func hash(into hasher: inout Swift.Hasher) {
        hasher.combine(kind)
        hasher.combine(length)
        hasher.combine(hashes.count)
    }
}

/// One piece's digest in progress: owns a libcrypto `EVP_MD_CTX` (`EVP_MD_CTX_new`,
/// `EVP_DigestInit_ex`, `EVP_DigestUpdate`, `EVP_DigestFinal_ex`), started again for each piece.
/// EVP rather than ``Hasher``'s low-level calls: a piece's state is never saved, and EVP is the
/// one interface that has SHA-1 without a deprecated call. Not thread-safe.
public final class PieceHasher {
    public let kind: PieceHashes.Kind
    private let context: OpaquePointer
    private let md: OpaquePointer

    /// nil when libcrypto cannot make the context (out of memory).
    public init?(_ kind: PieceHashes.Kind) {
        guard let context = EVP_MD_CTX_new() else { return nil }
        let md: OpaquePointer? = switch kind {
        case .sha1: EVP_sha1()
        case .sha256: EVP_sha256()
        case .sha384: EVP_sha384()
        case .sha512: EVP_sha512()
        }
        guard let md else {
            EVP_MD_CTX_free(context)
            return nil
        }
        self.kind = kind
        self.context = context
        self.md = md
        reset()
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Starts a new piece.
    public func reset() {
        EVP_DigestInit_ex(context, md, nil)
    }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    /// The piece's digest; the hasher must be ``reset()`` before the next piece.
    public func finish() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var count: UInt32 = 0
        EVP_DigestFinal_ex(context, &out, &count)
        return Array(out.prefix(Int(count)))
    }
}
