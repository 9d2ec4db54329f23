/// Bytes written once each and then only read, so a block may be shared between threads. The
/// header is how many bytes are taken. Holds the manifest's digests (``Digest``) and paths
/// (``ManifestPath``) side by side; they hold it as a ``SharedBlock``.
final class ByteBlock: ManagedBuffer<Int, UInt8> {
    static func make(capacity: Int) -> ByteBlock {
        // ManagedBuffer.create returns the class it is called on.
        unsafeDowncast(ByteBlock.create(minimumCapacity: capacity) { _ in 0 }, to: ByteBlock.self)
    }

    /// A block of its own holding exactly `bytes`, at offset 0 (a digest or a path made alone).
    static func holding(_ bytes: [UInt8]) -> ByteBlock {
        let block = make(capacity: bytes.count)
        _ = block.take(bytes.count) { $0.initialize(from: bytes, count: bytes.count) }
        return block
    }

    /// Whether `count` more bytes fit.
    func fits(_ count: Int) -> Bool { header + count <= capacity }

    /// Takes the next `count` bytes, has `fill` write them, returns their offset.
    func take(_ count: Int, _ fill: (UnsafeMutablePointer<UInt8>) -> Void) -> Int {
        withUnsafeMutablePointers { used, elements in
            let offset = used.pointee
            fill(elements + offset)
            used.pointee += count
            return offset
        }
    }

    /// The `count` bytes at `offset`.
    @inline(__always)
    func withBytes<R>(at offset: UInt32, count: UInt32, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try withUnsafeMutablePointerToElements { elements in
            try body(UnsafeBufferPointer(start: elements + Int(offset), count: Int(count)))
        }
    }
}

/// A ``ByteBlock`` as a ``Digest`` or a ``ManifestPath`` holds it, so that both are plainly
/// `Sendable` and read their bytes with no lock (once per entry and more: hashing, comparing, the
/// journal's lookups). `ManagedBuffer` is marked never `Sendable`, so its subclass cannot say it
/// is; this wrapper, the size of the reference, says it once for both.
///
/// Sendable, unchecked: a value reads only its own bytes, which ``ByteBlock/take(_:_:)`` wrote
/// before the value was made and nothing writes again. `take` writes only bytes past the header
/// and the header, which no value reads, and only the one thread that fills the block calls it
/// (its ``ByteArena``'s reader, or ``ByteBlock/holding(_:)`` before the block is shared). A value
/// may so go to another thread while its block is still being filled (`PlanLookAhead` takes
/// entries while the manifest is read); the hand-over that carries it (a lock, a thread's start)
/// makes its bytes visible there.
struct SharedBlock: @unchecked Sendable {
    let block: ByteBlock

    init(_ block: ByteBlock) { self.block = block }
}

/// Values made side by side in shared blocks of 64 KiB: for the manifest's entries, which are made
/// together and dropped together. Why: 10^6 entries made 10^6 arrays of 32 bytes for their
/// digests, each an 80-byte allocation, and 10^6 heap strings for their paths (docs/performance.md,
/// "10^6 entries", "Paths in the arena"). One reader's, on one thread (not `Sendable`); what it
/// makes are ordinary values. Not for values that outlive most of their neighbours (one kept value
/// keeps its whole block).
final class ByteArena {
    private static let blockSize = 64 * 1024
    private var current: ByteBlock?

    /// `count` bytes written by `fill`, which returns false to give up (the bytes are then left
    /// unused): their block and offset.
    func make(count: Int, _ fill: (UnsafeMutableBufferPointer<UInt8>) -> Bool) -> (block: ByteBlock, offset: Int)? {
        if current.map({ !$0.fits(count) }) ?? true {
            current = ByteBlock.make(capacity: max(count, ByteArena.blockSize))
        }
        guard let block = current else { return nil }
        var ok = false
        let offset = block.take(count) { ok = fill(UnsafeMutableBufferPointer(start: $0, count: count)) }
        return ok ? (block, offset) : nil
    }

    /// A digest of `count` bytes written by `fill` (nil when it gives up).
    func digest(count: Int, _ fill: (UnsafeMutableBufferPointer<UInt8>) -> Bool) -> Digest? {
        make(count: count, fill).map { Digest(block: $0.block, offset: $0.offset, count: count) }
    }

    /// `path`'s bytes, copied in.
    func path(_ path: String) -> ManifestPath {
        var contiguous = path  // withUTF8 is mutating: it may make the string contiguous first
        return contiguous.withUTF8 { bytes in
            let made = make(count: bytes.count) { out in
                if let base = bytes.baseAddress, !bytes.isEmpty { out.baseAddress?.initialize(from: base, count: bytes.count) }
                return true
            }
            guard let made else { return ManifestPath(path) }  // never: the fill never gives up
            return ManifestPath(block: made.block, offset: made.offset, count: bytes.count)
        }
    }
}
