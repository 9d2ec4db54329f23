import COpenSSL

/// Incremental SHA-256/SHA-512 with OpenSSL's libcrypto (`SHA256_Init`/`_Update`/`_Final` and their
/// SHA-512 twins, called through ``DigestAlgorithm``).
///
/// OpenSSL rather than swift-crypto because hashing is the slowest stage of a verified download on
/// machines without SHA-NI, and libcrypto's assembly is the fastest implementation available there.
/// The low-level interface rather than EVP because its context is a plain struct whose state can be
/// saved (``exportState()``) and restored, which lets a resumed download skip re-hashing its prefix.
/// The class owns the context's memory; it is not thread-safe.
public final class Hasher {
    public let algorithm: DigestAlgorithm
    private let context: UnsafeMutableRawPointer
    private let contextSize: Int
    private var finished = false

    public init(_ algorithm: DigestAlgorithm) {
        self.algorithm = algorithm
        contextSize = algorithm.contextSize
        context = .allocate(byteCount: contextSize, alignment: 16)
        reset()
    }

    deinit { context.deallocate() }

    /// Starts over, as if newly created.
    public func reset() {
        algorithm.initialize(context)
        finished = false
    }

    public func update(_ buffer: UnsafeRawBufferPointer) {
        precondition(!finished, "Hasher.update after finalize")
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        algorithm.update(context, base, buffer.count)
    }

    public func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Returns the digest. The hasher must be ``reset()`` before it is used again.
    public func finalize() -> Digest {
        precondition(!finished, "Hasher.finalize called twice")
        finished = true
        var out = [UInt8](repeating: 0, count: algorithm.byteCount)
        out.withUnsafeMutableBufferPointer { buffer in
            if let base = buffer.baseAddress { algorithm.finish(context, into: base) }
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
        var tag: [UInt8] = [algorithm.stateTag, UInt8(contextSize & 0xff), UInt8(contextSize >> 8)]
        for shift in stride(from: 0, to: 64, by: 8) { tag.append(UInt8((version >> UInt64(shift)) & 0xff)) }
        return tag
    }

    /// One-shot convenience for small inputs.
    public static func digest(_ algorithm: DigestAlgorithm, of bytes: [UInt8]) -> Digest {
        let h = Hasher(algorithm)
        h.update(bytes)
        return h.finalize()
    }
}
