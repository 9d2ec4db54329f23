/// A checksum value (SHA-256 or SHA-512), compared byte for byte and printed as lowercase hex.
///
/// The bytes live in a ``DigestBlock``: a digest of its own in one allocation, or the manifest's
/// digests side by side in blocks of 64 KiB (``DigestArena``). Why: a manifest of 10^6 entries
/// made 10^6 arrays of 32 bytes, each an 80-byte allocation (80 MB); packed, they take 32 MB.
/// `@unchecked Sendable`: its block's bytes are never written once the digest is made.
public struct Digest: Hashable, @unchecked Sendable, CustomStringConvertible {
    private let block: DigestBlock
    private let offset: UInt32
    private let count: UInt32

    public init(bytes: [UInt8]) {
        block = DigestBlock.make(capacity: bytes.count)
        offset = UInt32(block.take(bytes.count) { $0.initialize(from: bytes, count: bytes.count) })
        count = UInt32(bytes.count)
    }

    fileprivate init(block: DigestBlock, offset: Int, count: Int) {
        self.block = block
        self.offset = UInt32(offset)
        self.count = UInt32(count)
    }

    /// Parses hex digits, either case (the manifest spec says checksums are case-insensitive).
    /// Returns nil unless the text is exactly `byteCount * 2` hex digits.
    public init?(hex: String, byteCount: Int) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == byteCount * 2 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(byteCount)
        var i = 0
        while i < utf8.count {
            guard let hi = Digest.nibble(utf8[i]), let lo = Digest.nibble(utf8[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        self.init(bytes: out)
    }

    /// A copy of the bytes (an allocation: compare with ``withUnsafeBytes(_:)`` where it matters).
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try block.withUnsafeMutablePointerToElements { elements in
            try body(UnsafeRawBufferPointer(start: elements + Int(offset), count: Int(count)))
        }
    }

    public static func == (a: Digest, b: Digest) -> Bool {
        a.count == b.count && a.withUnsafeBytes { x in b.withUnsafeBytes { y in x.elementsEqual(y) } }
    }

    public func hash(into hasher: inout Swift.Hasher) {
        withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        withUnsafeBytes { bytes in
            for b in bytes {
                out.append(digits[Int(b >> 4)])
                out.append(digits[Int(b & 0x0f)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    public var description: String { hex }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// Bytes of digests, written once each and then only read (so a block may be shared between
/// threads). The header is how many bytes are taken.
final class DigestBlock: ManagedBuffer<Int, UInt8> {
    static func make(capacity: Int) -> DigestBlock {
        // ManagedBuffer.create returns the class it is called on.
        unsafeDowncast(DigestBlock.create(minimumCapacity: capacity) { _ in 0 }, to: DigestBlock.self)
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
}

/// Digests made side by side in shared blocks: for the manifest's entries, which are made together
/// and dropped together. One reader's, on one thread (not `Sendable`); the digests it makes are
/// ordinary `Digest`s. Not for digests that outlive most of their neighbours (one kept digest
/// keeps its whole block).
final class DigestArena {
    private static let blockSize = 64 * 1024
    private var current: DigestBlock?

    /// A digest of `count` bytes written by `fill`, which returns false to give up (the bytes are
    /// then left unused).
    func make(count: Int, _ fill: (UnsafeMutableBufferPointer<UInt8>) -> Bool) -> Digest? {
        if current.map({ !$0.fits(count) }) ?? true {
            current = DigestBlock.make(capacity: max(count, DigestArena.blockSize))
        }
        guard let block = current else { return nil }
        var ok = false
        let offset = block.take(count) { ok = fill(UnsafeMutableBufferPointer(start: $0, count: count)) }
        return ok ? Digest(block: block, offset: offset, count: count) : nil
    }
}
