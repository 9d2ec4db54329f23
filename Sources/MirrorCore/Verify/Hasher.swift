import COpenSSL

/// Which digest algorithm a ``Hasher`` computes.
public enum HashAlgorithm: Sendable {
    case sha256, sha512

    var byteCount: Int { self == .sha256 ? 32 : 64 }
}

/// Incremental SHA-256/SHA-512 through OpenSSL's EVP interface (`EVP_DigestInit_ex`,
/// `EVP_DigestUpdate`, `EVP_DigestFinal_ex`).
///
/// OpenSSL rather than swift-crypto because hashing is the slowest stage of a verified download on
/// machines without SHA-NI, and libcrypto's assembly is the fastest implementation available there.
/// The class owns its `EVP_MD_CTX` and frees it in `deinit`; it is not thread-safe.
public final class Hasher {
    public let algorithm: HashAlgorithm
    private let context: OpaquePointer
    private var finished = false

    public init(_ algorithm: HashAlgorithm) {
        self.algorithm = algorithm
        // EVP_MD_CTX_new only fails when malloc fails; there is no way to continue without memory.
        guard let ctx = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
        context = ctx
        Hasher.initialise(ctx, algorithm)
    }

    deinit { EVP_MD_CTX_free(context) }

    private static func initialise(_ ctx: OpaquePointer, _ algorithm: HashAlgorithm) {
        let md = algorithm == .sha256 ? EVP_sha256() : EVP_sha512()
        guard EVP_DigestInit_ex(ctx, md, nil) == 1 else { fatalError("EVP_DigestInit_ex failed") }
    }

    /// Starts over, as if newly created.
    public func reset() {
        Hasher.initialise(context, algorithm)
        finished = false
    }

    public func update(_ buffer: UnsafeRawBufferPointer) {
        precondition(!finished, "Hasher.update after finalize")
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        EVP_DigestUpdate(context, base, buffer.count)
    }

    public func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Returns the digest. The hasher must be ``reset()`` before it is used again.
    public func finalize() -> Digest {
        precondition(!finished, "Hasher.finalize called twice")
        finished = true
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &out, &length)
        return Digest(bytes: Array(out.prefix(Int(length))))
    }

    /// One-shot convenience for small inputs.
    public static func digest(_ algorithm: HashAlgorithm, of bytes: [UInt8]) -> Digest {
        let h = Hasher(algorithm)
        h.update(bytes)
        return h.finalize()
    }
}
