/// rsync's `wildmatch` (lib/wildmatch.c) on bytes, for ``GlobPattern``: a pattern body against
/// one whole text (a path, or one name in it), with characters read as UTF-8 scalars.
///
/// Why its two ways of giving up: after a `*` fails to match at every later place, nothing
/// earlier can help either (`abortAll`); after a single `*` meets a `/`, only an outer `**` can
/// (`abortToStarStar`). Without them a pattern like `*a*a*a*b` backtracks exponentially.
enum GlobMatcher {
    enum Result { case match, noMatch, abortAll, abortToStarStar }

    private static let slash = UInt8(ascii: "/")
    private static let star = UInt8(ascii: "*")
    private static let backslash = UInt8(ascii: "\\")

    static func match(_ pattern: UnsafeBufferPointer<UInt8>, _ text: UnsafeBufferPointer<UInt8>) -> Bool {
        run(pattern, 0, text, 0) == .match
    }

    /// The scalar at `i` and its length in bytes; a byte that does not start valid UTF-8 is a
    /// character of its own (its value above any scalar's, so no class range holds it by chance).
    static func scalar(_ bytes: UnsafeBufferPointer<UInt8>, _ i: Int) -> (value: UInt32, length: Int) {
        let lead = bytes[i]
        if lead < 0x80 { return (UInt32(lead), 1) }
        let length = lead >= 0xF0 && lead < 0xF5 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 && lead < 0xE0 ? 2 : 0
        guard length > 0, i + length <= bytes.count else { return (0x110000 + UInt32(lead), 1) }
        var value = UInt32(lead) & (0xFF >> (length + 1))
        for k in 1 ..< length {
            let next = bytes[i + k]
            guard next & 0xC0 == 0x80 else { return (0x110000 + UInt32(lead), 1) }
            value = value << 6 | UInt32(next & 0x3F)
        }
        return (value, length)
    }

    /// The index of the `]` that closes the class opened at `start`, or nil. A `]` right after
    /// `[`, `[!` or `[^` is a member, as in rsync and `fnmatch(3)`.
    static func classEnd(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        var i = start + 1
        if i < bytes.count, bytes[i] == UInt8(ascii: "!") || bytes[i] == UInt8(ascii: "^") { i += 1 }
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1 }
        while i < bytes.count {
            if bytes[i] == backslash { i += 2; continue }
            if bytes[i] == UInt8(ascii: "]") { return i }
            i += 1
        }
        return nil
    }

    static func classEnd(_ bytes: [UInt8], from start: Int) -> Int? {
        bytes.withUnsafeBufferPointer { classEnd($0, from: start) }
    }

    /// Whether the class `pattern[start...end]` holds `value`.
    private static func classHolds(_ pattern: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ value: UInt32) -> Bool {
        var i = start + 1
        let negated = pattern[i] == UInt8(ascii: "!") || pattern[i] == UInt8(ascii: "^")
        if negated { i += 1 }
        var holds = false
        // Every byte before `end` is a member (a `]` only first: ``classEnd(_:from:)``).
        while i < end {
            if pattern[i] == backslash { i += 1 }
            let (low, n) = scalar(pattern, i)
            i += n
            var high = low
            if i + 1 < end, pattern[i] == UInt8(ascii: "-") {
                var j = i + 1
                if pattern[j] == backslash { j += 1 }
                let (upper, m) = scalar(pattern, j)
                high = upper
                i = j + m
            }
            if low <= value && value <= high { holds = true }
        }
        return holds != negated
    }

    private static func run(_ p: UnsafeBufferPointer<UInt8>, _ pStart: Int, _ t: UnsafeBufferPointer<UInt8>, _ tStart: Int) -> Result {
        var pi = pStart
        var ti = tStart
        while pi < p.count {
            let pc = p[pi]
            if ti >= t.count && pc != star { return .abortAll }
            switch pc {
            case backslash:
                pi += 1
                guard p[pi] == t[ti] else { return .noMatch }
                pi += 1
                ti += 1
            case UInt8(ascii: "?"):
                guard t[ti] != slash else { return .noMatch }
                ti += scalar(t, ti).length
                pi += 1
            case star:
                let first = pi
                pi += 1
                var crossesSlash = false
                if pi < p.count && p[pi] == star {
                    while pi < p.count && p[pi] == star { pi += 1 }
                    crossesSlash = true
                    // `**/` at the start or after a `/` may stand for no folder: a/**/b matches a/b.
                    if (first == 0 || p[first - 1] == slash) && pi < p.count && p[pi] == slash,
                       run(p, pi + 1, t, ti) == .match {
                        return .match
                    }
                }
                if pi == p.count {
                    // A trailing `**` takes the rest; a trailing `*` only if no `/` is left.
                    if !crossesSlash && t[ti...].contains(slash) { return .noMatch }
                    return .match
                }
                while ti < t.count {
                    let result = run(p, pi, t, ti)
                    if result != .noMatch {
                        if !crossesSlash || result != .abortToStarStar { return result }
                    } else if !crossesSlash && t[ti] == slash {
                        return .abortToStarStar
                    }
                    ti += scalar(t, ti).length
                }
                return .abortAll
            case UInt8(ascii: "["):
                guard t[ti] != slash, let end = classEnd(p, from: pi) else { return .noMatch }
                let (value, n) = scalar(t, ti)
                guard classHolds(p, pi, end, value) else { return .noMatch }
                pi = end + 1
                ti += n
            default:
                guard pc == t[ti] else { return .noMatch }
                pi += 1
                ti += 1
            }
        }
        return ti == t.count ? .match : .noMatch
    }
}
