/// `--max-delete N` or `--max-delete N%`: how many files one run may delete before it refuses to
/// delete any (`DeletionPolicy`). A count, or a share of the files mirror knows in DEST.
public enum DeleteLimit: Sendable, Hashable, CustomStringConvertible {
    case count(Int)
    /// Percent, 0...100.
    case percent(Double)

    /// Half of what mirror knows: a manifest that lost half its entries is more often a mistake
    /// (a truncated upload, a wrong folder given to `manifest create`) than an intended purge.
    public static let `default` = DeleteLimit.percent(50)

    public init(parsing text: String) throws(ArgumentValueError) {
        let t = text.trimmingSpaces
        if t.hasSuffix("%") {
            let number = t.dropLast()
            guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
                  let value = Double(number), value >= 0, value <= 100 else { throw .notADeleteLimit }
            self = .percent(value)
        } else {
            guard !t.isEmpty, t.count <= 18, t.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(t) else { throw .notADeleteLimit }
            self = .count(value)
        }
    }

    /// The most files that may go, out of `known`.
    public func allowed(outOf known: Int) -> Int {
        switch self {
        case .count(let n): return n
        case .percent(let p): return Int((Double(known) * p / 100).rounded(.down))
        }
    }

    public var description: String {
        switch self {
        case .count(let n): return "\(n)"
        case .percent(let p): return p == p.rounded() ? "\(Int(p))%" : "\(p)%"
        }
    }
}
