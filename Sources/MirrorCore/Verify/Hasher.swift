import COpenSSL

/// Which digest algorithm a ``Hasher`` computes.
public enum HashAlgorithm: Sendable {
    case sha256, sha512

    var byteCount: Int { self == .sha256 ? 32 : 64 }
}

/// Incremental SHA-256/SHA-512 with OpenSSL's libcrypto (`SHA256_Init`/`_Update`/`_Final`).
///
/// OpenSSL rather than swift-crypto because hashing is the slowest stage of a verified download on
/// machines without SHA-NI, and libcrypto's assembly is the fastest implementation available there.
/// The low-level interface rather than EVP because its context is a plain struct whose state can be
/// saved (``exportState()``) and restored, which lets a resumed download skip re-hashing its prefix.
/// The class owns the context's memory; it is not thread-safe.
public final class Hasher {
    public let algorithm: HashAlgorithm
    private let context: UnsafeMutableRawPointer
    private let contextSize: Int
    private var finished = false

    public init(_ algorithm: HashAlgorithm) {
        self.algorithm = algorithm
        contextSize = algorithm == .sha256 ? MemoryLayout<SHA256_CTX>.size : MemoryLayout<SHA512_CTX>.size
        context = .allocate(byteCount: contextSize, alignment: 16)
        reset()
    }

    deinit { context.deallocate() }

    /// Starts over, as if newly created.
    public func reset() {
        switch algorithm {
        case .sha256: SHA256_Init(context.assumingMemoryBound(to: SHA256_CTX.self))
        case .sha512: SHA512_Init(context.assumingMemoryBound(to: SHA512_CTX.self))
        }
        finished = false
    }

    public func update(_ buffer: UnsafeRawBufferPointer) {
        precondition(!finished, "Hasher.update after finalize")
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        switch algorithm {
        case .sha256: SHA256_Update(context.assumingMemoryBound(to: SHA256_CTX.self), base, buffer.count)
        case .sha512: SHA512_Update(context.assumingMemoryBound(to: SHA512_CTX.self), base, buffer.count)
        }
    }

    public func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Returns the digest. The hasher must be ``reset()`` before it is used again.
    public func finalize() -> Digest {
        precondition(!finished, "Hasher.finalize called twice")
        finished = true
        var out = [UInt8](repeating: 0, count: algorithm.byteCount)
        switch algorithm {
        case .sha256: SHA256_Final(&out, context.assumingMemoryBound(to: SHA256_CTX.self))
        case .sha512: SHA512_Final(&out, context.assumingMemoryBound(to: SHA512_CTX.self))
        }
        return Digest(bytes: out)
    }

    // MARK: - Saved state

    /// The intermediate state, tagged with what it is only valid for: the algorithm, this
    /// libcrypto's version and the context's size. ``restore(_:)`` refuses anything else.
    public func exportState() -> [UInt8] {
        var out = stateTag
        out += UnsafeRawBufferPointer(start: context, count: contextSize)
        return out
    }

    /// Restores a state from ``exportState()``; false (and the hasher unchanged) when it was made
    /// by another algorithm or another libcrypto, or is damaged.
    @discardableResult
    public func restore(_ state: [UInt8]) -> Bool {
        let tag = stateTag
        guard state.count == tag.count + contextSize, state.starts(with: tag) else { return false }
        let copied = state.withUnsafeBytes { raw -> Bool in
            guard let base = raw.baseAddress else { return false }
            context.copyMemory(from: base + tag.count, byteCount: contextSize)
            return true
        }
        if copied { finished = false }
        return copied
    }

    private var stateTag: [UInt8] {
        let version = UInt64(OpenSSL_version_num())
        var tag: [UInt8] = [algorithm == .sha256 ? 1 : 2, UInt8(contextSize & 0xff), UInt8(contextSize >> 8)]
        for shift in stride(from: 0, to: 64, by: 8) { tag.append(UInt8((version >> UInt64(shift)) & 0xff)) }
        return tag
    }

    /// One-shot convenience for small inputs.
    public static func digest(_ algorithm: HashAlgorithm, of bytes: [UInt8]) -> Digest {
        let h = Hasher(algorithm)
        h.update(bytes)
        return h.finalize()
    }
}
