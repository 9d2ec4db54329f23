/// A length of time as people write it on a command line (`--deadline`, `--stall-timeout`,
/// `--jitter`): numbers with units `ms`, `s`, `m`, `h`, `d`, which may be combined (`1h30m`).
///
/// Every number needs its unit: a bare `45` in a cron line, meant as minutes, once stopped a run
/// after 45 seconds (docs/cli.md, "Values of options"). The one exception is `0`, which is the same in every unit.
/// (Named so, not `Duration`, to stay clear of the standard library's type.)
public struct TimeSpan: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var seconds: Double

    public init(seconds: Double) {
        self.seconds = seconds
    }

    /// Reads `text`, or throws ``ArgumentValueError/durationWithoutUnit(_:)`` for a bare number
    /// other than 0 and ``ArgumentValueError/notADuration`` for anything else that is not a
    /// duration (a sign, an unknown unit, a unit without its number).
    public init(parsing text: String) throws(ArgumentValueError) {
        let t = text.trimmingSpaces.lowercased()
        if let plain = Double(t), t.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }) {
            guard plain == 0 else { throw .durationWithoutUnit(t) }
            seconds = 0
            return
        }
        var total = 0.0
        var number = ""
        var index = t.startIndex
        while index < t.endIndex {
            let c = t[index]
            if c.isASCII && (c.isNumber || c == ".") {
                number.append(c)
                index = t.index(after: index)
                continue
            }
            let next = t.index(after: index)
            let unit = c == "m" && next < t.endIndex && t[next] == "s" ? "ms" : String(c)
            guard let value = Double(number), let scale = Self.unitSeconds[unit] else { throw .notADuration }
            total += value * scale
            number = ""
            index = t.index(index, offsetBy: unit.count)
        }
        guard number.isEmpty, !t.isEmpty else { throw .notADuration }
        seconds = total
    }

    /// Reads `text` as ``init(parsing:)`` does, and also refuses less than `minimum`, for options
    /// that a shorter time would make useless (a stall timeout under a second aborts every
    /// transfer).
    public init(parsing text: String, atLeast minimum: TimeSpan) throws(ArgumentValueError) {
        try self.init(parsing: text)
        guard self >= minimum else { throw .durationBelow(minimum: minimum) }
    }

    static let unitSeconds: [String: Double] = ["ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400]

    /// The largest unit that gives a whole number, in a form ``init(parsing:)`` reads back:
    /// `30s`, `45m`, `2h`, `1d`, `1500ms`; `0` for zero.
    public var description: String {
        if seconds == 0 { return "0" }
        for (unit, scale) in [("d", 86400.0), ("h", 3600), ("m", 60), ("s", 1)] {
            let count = seconds / scale
            if count == count.rounded() { return "\(Int64(count))\(unit)" }
        }
        let milliseconds = seconds * 1000
        if milliseconds == milliseconds.rounded() { return "\(Int64(milliseconds))ms" }
        return "\(seconds)s"
    }

    public static func < (lhs: TimeSpan, rhs: TimeSpan) -> Bool {
        lhs.seconds < rhs.seconds
    }
}
