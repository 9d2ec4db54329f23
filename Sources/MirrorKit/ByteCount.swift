/// A number of bytes as people write it on a command line (`--segments-above`): `64M`, `512K`,
/// `2G`, `1.5G`, `4096`. The units are binary (K = 1024), as in curl's and rsync's options, with
/// or without a trailing `B` or `iB`, in any case.
///
/// It is parsed once, by the argument parser, so the command never meets the text again and has no
/// fallback for a value that does not parse.
public struct ByteCount: Sendable, Hashable, CustomStringConvertible {
    public var bytes: Int64

    public init(bytes: Int64) {
        self.bytes = bytes
    }

    /// Reads `text`, or throws ``ArgumentValueError/notASize``: for a sign, an exponent, a
    /// fraction of a byte left after rounding aside, anything but digits, one `.` and a unit.
    public init(parsing text: String) throws(ArgumentValueError) {
        guard let bytes = Self.bytes(in: text, units: "KMGT") else { throw .notASize }
        self.bytes = bytes
    }

    /// The number in `text` times its unit's power of 1024, rounded to a whole byte; nil for
    /// anything else or for more than `Int64` holds. `units` are the unit letters allowed, in
    /// order from 1024¹. Shared with ``ByteRate``, whose values are written the same way.
    static func bytes(in text: String, units: String) -> Int64? {
        var t = Substring(text.trimmingSpaces.uppercased())
        if t.hasSuffix("IB") { t = t.dropLast(2) } else if t.hasSuffix("B") { t = t.dropLast() }
        var multiplier: Double = 1
        if let unit = t.last, let power = units.firstIndex(of: unit) {
            multiplier = Double(1 << (10 * (units.distance(from: units.startIndex, to: power) + 1)))
            t = t.dropLast()
        }
        guard !t.isEmpty, t.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), let value = Double(t) else { return nil }
        let bytes = (value * multiplier).rounded()
        guard bytes >= 0, bytes < 9.2e18 else { return nil }
        return Int64(bytes)
    }

    /// The shortest exact form that ``init(parsing:)`` reads back: `64M`, `1536K`, `1000`.
    public var description: String {
        for (unit, shift) in [("T", 40), ("G", 30), ("M", 20), ("K", 10)] where bytes != 0 && bytes % (Int64(1) << shift) == 0 {
            return "\(bytes >> shift)\(unit)"
        }
        return "\(bytes)"
    }
}
