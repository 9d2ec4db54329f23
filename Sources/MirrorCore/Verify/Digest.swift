/// A checksum value (SHA-256 or SHA-512), compared byte for byte and printed as lowercase hex.
public struct Digest: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

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
        bytes = out
    }

    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
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
