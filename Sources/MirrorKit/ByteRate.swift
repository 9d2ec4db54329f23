/// Bytes per second as people write them on a command line (`--limit-rate`): `500K`, `20M`,
/// `1G`, `1.5m`, or plain bytes (`65536`), with an optional `B`, `iB` or `/s`. K, M and G are
/// powers of 1024, as in curl's own `--limit-rate`.
///
/// At least 1 byte per second: a limit of 0 would stall every transfer, and "no limit" is said
/// by leaving the option out. At most 10^15 (about 888 TiB/s), far beyond any link, so that the
/// rate limiter's arithmetic never overflows.
public struct ByteRate: Sendable, Hashable, CustomStringConvertible {
    public var bytesPerSecond: Int64

    public init(bytesPerSecond: Int64) {
        self.bytesPerSecond = bytesPerSecond
    }

    /// Reads `text`, or throws ``ArgumentValueError/zeroRate`` for zero and
    /// ``ArgumentValueError/notARate`` for anything else that is not a rate.
    public init(parsing text: String) throws(ArgumentValueError) {
        var t = text.trimmingSpaces.lowercased()
        if t.hasSuffix("/s") { t.removeLast(2) }
        guard let bytes = ByteCount.bytes(in: t, units: "KMGT") else { throw .notARate }
        guard bytes >= 1 else { throw .zeroRate }
        guard bytes < 1_000_000_000_000_000 else { throw .notARate }
        bytesPerSecond = bytes
    }

    /// The shortest exact form that ``init(parsing:)`` reads back: `500K`, `20M`, `1000`.
    public var description: String {
        ByteCount(bytes: bytesPerSecond).description
    }
}
