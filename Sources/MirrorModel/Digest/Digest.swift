/// A checksum value (SHA-256 or SHA-512), compared byte for byte and printed as lowercase hex.
///
/// The bytes live in a ``ByteBlock``: a digest of its own in one allocation, or the manifest's
/// digests side by side in blocks of 64 KiB (``ByteArena``). Why: a manifest of 10^6 entries
/// made 10^6 arrays of 32 bytes, each an 80-byte allocation (80 MB); packed, they take 32 MB.
/// `Sendable`: its bytes are never written once the digest is made (``SharedBlock`` says why a
/// block may be shared).
public struct Digest: Hashable, Sendable, CustomStringConvertible {
    private let shared: SharedBlock
    private let offset: UInt32
    private let count: UInt32

    public init(bytes: [UInt8]) {
        self.init(block: ByteBlock.holding(bytes), offset: 0, count: bytes.count)
    }

    init(block: ByteBlock, offset: Int, count: Int) {
        self.shared = SharedBlock(block)
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
        try shared.block.withBytes(at: offset, count: count) { try body(UnsafeRawBufferPointer($0)) }
    }

    public static func == (a: Digest, b: Digest) -> Bool {
        a.count == b.count && a.withUnsafeBytes { x in b.withUnsafeBytes { y in x.elementsEqual(y) } }
    }

    public func hash(into hasher: inout Swift.Hasher) {
        withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    /// Lowercase hex, written straight into the string's storage: one allocation, where building
    /// an array first took four (the journal writes a digest for every file it installs).
    public var hex: String {
        withUnsafeBytes { bytes in
            String(unsafeUninitializedCapacity: bytes.count * 2) { out in
                var i = 0
                for b in bytes {
                    out[i] = Digest.hexDigit(b >> 4)
                    out[i + 1] = Digest.hexDigit(b & 0x0f)
                    i += 2
                }
                return i
            }
        }
    }

    /// The lowercase hex digit of `v` (0...15); the journal's checksums use it too.
    package static func hexDigit(_ v: UInt8) -> UInt8 { v < 10 ? UInt8(ascii: "0") + v : UInt8(ascii: "a") - 10 + v }

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
