extension Formatting {
    /// Parses a size as people write it on a command line: `64M`, `512K`, `2G`, `1.5G`, `4096`
    /// (bytes). The suffixes are binary (K = 1024), with or without a trailing `B` or `iB`.
    public static func parseByteCount(_ text: String) -> Int64? {
        var t = Substring(text.trimmingSpaces.uppercased())
        if t.hasSuffix("IB") { t = t.dropLast(2) } else if t.hasSuffix("B") { t = t.dropLast() }
        var multiplier: Double = 1
        if let unit = t.last, let power = "KMGT".firstIndex(of: unit) {
            multiplier = Double(1 << (10 * ("KMGT".distance(from: "KMGT".startIndex, to: power) + 1)))
            t = t.dropLast()
        }
        guard !t.isEmpty, t.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), let value = Double(t) else { return nil }
        let bytes = (value * multiplier).rounded()
        guard bytes >= 0, bytes < 9.2e18 else { return nil }
        return Int64(bytes)
    }
}
