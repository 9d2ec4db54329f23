/// One ``Hasher`` per algorithm an entry lists, driven together: every byte goes to each of them,
/// and their digests and saved states come back as one set.
///
/// Only the listed algorithms are computed: each costs a full pass of the CPU over the bytes.
/// Not thread-safe, like ``Hasher``.
public struct HasherSet {
    /// In ``DigestAlgorithm``'s order.
    let members: [Hasher]

    /// Hashers for the algorithms that have a value in `listed` (the expected digests, or their hex).
    public init<Value>(for listed: PerAlgorithm<Value>) {
        members = listed.map { Hasher($0.algorithm) }
    }

    public func update(_ buffer: UnsafeRawBufferPointer) {
        for hasher in members { hasher.update(buffer) }
    }

    /// Starts every hasher over.
    public func reset() {
        for hasher in members { hasher.reset() }
    }

    /// The digests (``Hasher/finalize()``); the set must be ``reset()`` before it is used again.
    public func finalize() -> DigestSet {
        var out = DigestSet()
        for hasher in members { out[hasher.algorithm] = hasher.finalize() }
        return out
    }

    /// Each hasher's intermediate state (``Hasher/exportState()``) in hex, as a partial record
    /// keeps it (`h256=`, docs/journal.md).
    public func savedStates() -> PerAlgorithm<String> {
        var out = PerAlgorithm<String>()
        for hasher in members { out[hasher.algorithm] = Digest(bytes: hasher.exportState()).hex }
        return out
    }

    /// Each hasher's intermediate state as bytes (``Hasher/exportState()``), to go back to with
    /// ``restoreRaw(_:)``: a download whose Metalink piece turned out wrong rewinds the whole-file
    /// hash to the piece's first byte.
    public func rawStates() -> [[UInt8]] {
        members.map { $0.exportState() }
    }

    /// Restores the states ``rawStates()`` took from this very set; false (and every hasher
    /// started over) when one does not fit.
    public func restoreRaw(_ states: [[UInt8]]) -> Bool {
        guard states.count == members.count, zip(members, states).allSatisfy({ $0.restore($1) }) else {
            reset()
            return false
        }
        return true
    }

    /// Restores every hasher from `states` (hex, from ``savedStates()``). All or nothing: when a
    /// hasher has no state, or its state is not valid hex or not one this libcrypto made for its
    /// algorithm (``Hasher/restore(_:)``), every hasher starts over and the result is false.
    /// States of algorithms not in the set are ignored.
    public func restore(_ states: PerAlgorithm<String>) -> Bool {
        for hasher in members {
            guard let state = states[hasher.algorithm],
                  let bytes = Digest(hex: state, byteCount: state.utf8.count / 2)?.bytes,
                  hasher.restore(bytes) else {
                reset()
                return false
            }
        }
        return true
    }
}
