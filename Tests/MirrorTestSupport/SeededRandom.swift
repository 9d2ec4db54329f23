/// SplitMix64 as a choice maker for randomized tests: one 64-bit seed decides every choice, so a
/// failing walk can be replayed by passing its seed back in (the seed is what a test prints).
///
/// A separate generator from ``TestData``'s byte stream because a test draws choices (sizes,
/// delays, which step next) one at a time, and a public type so that any suite can share it.
public struct SeededRandom {
    public private(set) var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<n` (n > 0).
    public mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(1, n))) }

    /// A number in `range` (inclusive).
    public mutating func inRange(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + below(range.upperBound - range.lowerBound + 1)
    }

    /// True with probability `p`.
    public mutating func chance(_ p: Double) -> Bool { Double(next() >> 11) / Double(1 << 53) < p }

    public mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }

    /// An index into `weights`, each chosen in proportion to its weight.
    public mutating func weighted(_ weights: [Int]) -> Int {
        var roll = below(weights.reduce(0, +))
        for (index, weight) in weights.enumerated() {
            if roll < weight { return index }
            roll -= weight
        }
        return weights.count - 1
    }
}
