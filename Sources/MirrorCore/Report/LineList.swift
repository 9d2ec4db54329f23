/// Lines of text kept side by side in one byte buffer, read back as `String`s: the plan of a dry
/// run of 10^6 entries is one allocation of their bytes rather than 10^6 strings of ~100 bytes
/// each (docs/performance.md, "Reports that stream").
public struct LineList: RandomAccessCollection, ExpressibleByArrayLiteral, Equatable, Sendable {
    private var bytes: [UInt8] = []
    /// Where each line ends in `bytes`; line `i` starts where line `i - 1` ends.
    private var ends: [Int] = []

    public init() {}

    public init(arrayLiteral lines: String...) {
        for line in lines { append(line) }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { ends.count }

    public subscript(position: Int) -> String {
        let start = position == 0 ? 0 : ends[position - 1]
        return String(decoding: bytes[start ..< ends[position]], as: UTF8.self)
    }

    public mutating func append(_ line: String) {
        bytes.append(contentsOf: line.utf8)
        ends.append(bytes.count)
    }
}
