#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads the common shape of a manifest without libyaml, for speed; anything else is left to libyaml.
///
/// Why: parsing with libyaml is most of a no-op run's time (about 21,000 instructions per entry of
/// a 100,000-entry manifest, half of the run). Manifests written by tools, `mirror manifest create`
/// among them, use a small part of YAML: block mappings and sequences, one `key: value` per line,
/// plain or simple double-quoted scalars, comments. This scanner accepts exactly that and feeds the
/// same ``YAMLTreeBuilder`` events libyaml would, with the same positions, so the tree, every check
/// on it and every error message are the same; the tests compare both readers node by node.
///
/// It gives up (returns nil, and libyaml reads the file) at the first thing outside that subset:
/// tabs, carriage returns, a byte-order mark, flow collections, anchors and aliases, tags,
/// single-quoted, escaped, multi-line or block scalars, a key that is not a plain identifier, a
/// value spreading over a second line, a `key:` with no value (null), document markers and
/// directives, a character libyaml would refuse or treat as a line break. It never reports an
/// error of its own: an invalid manifest is always diagnosed by libyaml.
struct FastManifestScanner {
    private let b: UnsafeBufferPointer<UInt8>
    private var builder: YAMLTreeBuilder
    /// The current line: where it starts, where its content starts (after the indentation), where it
    /// ends (its newline, or the end of the input), and its 1-based number.
    private var lineStart = 0
    private var contentStart = 0
    private var lineEnd = 0
    private var lineNumber: Int32 = 0
    private var atEnd = false

    /// Why the scanner stopped: the input is not in its subset.
    private struct Unsupported: Error {}

    /// The scanner stopped (the input is not in its subset) after giving back pages of the input
    /// it had read (``read(_:entries:releasing:)``): libyaml needs the bytes read again.
    struct InputReleased: Error {}

    /// Give back the pages of the input already read (`madvise(MADV_DONTNEED)`), so that a
    /// manifest of 110 MB is not resident whole beside its 10^6 entries. Only for an input that
    /// nothing else will read: a page given back reads as zeros.
    private var releaseStep: Int?
    private var releasedUpTo = 0
    private var released = false
    /// Pages are given back this many bytes at a time, for an input at least twice as long.
    static let defaultReleaseStep = 8 << 20

    /// The tree for `input`, or nil when libyaml must read it.
    static func tree(from input: UnsafeBufferPointer<UInt8>) -> YAMLTree? {
        (try? read(input, entries: nil))?.tree
    }

    /// The tree (and, with `entries`, the streamed `files` items: ``YAMLTreeBuilder``), or nil when
    /// libyaml must read it.
    ///
    /// With a `releaseStep`, the pages of `input` behind the line being read are given back to
    /// the system that many bytes at a time (they read as zeros afterwards): for a caller that
    /// owns the only copy of the bytes and can read them again. When the scanner then gives up,
    /// it throws ``InputReleased`` instead of returning nil.
    static func read(_ input: UnsafeBufferPointer<UInt8>, entries: ManifestEntryStream?,
                     releaseStep: Int? = nil) throws -> YAMLTreeBuilder.Parsed? {
        guard isPlainText(input) else { return nil }
        var scanner = FastManifestScanner(b: input, builder: YAMLTreeBuilder(inputSize: input.count, entries: entries))
        if let releaseStep, releaseStep > 0, input.count >= 2 * releaseStep { scanner.releaseStep = releaseStep }
        do {
            return try scanner.document()
        } catch {
            if scanner.released { throw InputReleased() }
            return nil
        }
    }

    /// Gives back the whole pages of the input before the current line, every few MB.
    private mutating func releaseBehind() {
        guard let step = releaseStep, lineStart - releasedUpTo >= step, let base = b.baseAddress else { return }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        guard page > 0 else { return }
        let from = (Int(bitPattern: base) + releasedUpTo + page - 1) / page * page
        let to = (Int(bitPattern: base) + lineStart) / page * page
        guard to > from, let start = UnsafeMutableRawPointer(bitPattern: from) else { return }
        if madvise(start, to - from, MADV_DONTNEED) == 0 { released = true }
        releasedUpTo = lineStart
    }

    private init(b: UnsafeBufferPointer<UInt8>, builder: YAMLTreeBuilder) {
        self.b = b
        self.builder = builder
    }

    // MARK: - Lines

    /// Moves to the next line that holds content (skipping blank and comment-only lines).
    private mutating func nextContentLine(from start: Int) {
        var s = start
        while s < b.count {
            var e = s
            while e < b.count && b[e] != 0x0A { e += 1 }
            lineNumber += 1
            var c = s
            while c < e && b[c] == 0x20 { c += 1 }
            if c < e && b[c] != 0x23 {  // not blank, not a comment
                lineStart = s
                contentStart = c
                lineEnd = e
                return
            }
            s = e + 1
        }
        atEnd = true
    }

    private mutating func advance() { nextContentLine(from: lineEnd + 1) }

    private var indent: Int { contentStart - lineStart }

    private var isSequenceEntry: Bool {
        b[contentStart] == 0x2D && (contentStart + 1 == lineEnd || b[contentStart + 1] == 0x20)
    }

    // MARK: - Structure

    private mutating func document() throws -> YAMLTreeBuilder.Parsed? {
        nextContentLine(from: 0)
        guard !atEnd, indent == 0, !isSequenceEntry else { throw Unsupported() }
        builder.startDocument()
        try mapping(at: 0, firstKey: contentStart)
        guard atEnd else { throw Unsupported() }  // something outside the root mapping
        return builder.finish()
    }

    /// A block mapping whose keys start at column `indent`; the first key is at `firstKey` on the
    /// current line (after `- ` for a mapping inside a sequence entry).
    private mutating func mapping(at indent: Int, firstKey: Int) throws {
        try builder.startCollection(isMapping: true, line: lineNumber, column: Int32(firstKey - lineStart + 1))
        var keyStart = firstKey
        while true {
            let afterColon = try key(at: keyStart)
            if try !value(from: afterColon, parentIndent: indent) {
                // `key:` alone: a nested block follows on the next lines.
                advance()
                guard !atEnd else { throw Unsupported() }
                if isSequenceEntry && self.indent >= indent {
                    try sequence(at: self.indent)
                } else if self.indent > indent && !isSequenceEntry {
                    try mapping(at: self.indent, firstKey: contentStart)
                } else {
                    throw Unsupported()  // a null value: libyaml places it
                }
            } else {
                advance()
            }
            // The next key of this mapping, or its end.
            if atEnd || self.indent < indent { break }
            if self.indent == indent && isSequenceEntry { break }  // the next entry of an indentless sequence
            guard self.indent == indent else { throw Unsupported() }  // a value continued on this line
            keyStart = contentStart
        }
        try builder.endCollection(isMapping: true)
    }

    /// A block sequence whose `-` are at column `indent`; each entry a scalar or a mapping.
    private mutating func sequence(at indent: Int) throws {
        try builder.startCollection(isMapping: false, line: lineNumber, column: Int32(contentStart - lineStart + 1))
        while !atEnd && self.indent == indent && isSequenceEntry {
            releaseBehind()
            var item = contentStart + 1
            while item < lineEnd && b[item] == 0x20 { item += 1 }
            guard item < lineEnd, b[item] != 0x23 else { throw Unsupported() }  // `-` alone: a null or a nested block
            if isKeyAhead(item) {
                try mapping(at: item - lineStart, firstKey: item)
            } else {
                guard try value(from: item, parentIndent: indent, isItem: true) else { throw Unsupported() }
                advance()
            }
        }
        if !atEnd && self.indent > indent { throw Unsupported() }
        try builder.endCollection(isMapping: false)
    }

    // MARK: - Scalars

    /// Whether a plain identifier key and its `:` start at `i`.
    private func isKeyAhead(_ i: Int) -> Bool {
        var j = i
        while j < lineEnd && FastManifestScanner.isKeyByte(b[j], first: j == i) { j += 1 }
        return j > i && j < lineEnd && b[j] == 0x3A && (j + 1 == lineEnd || b[j + 1] == 0x20)
    }

    /// Reads a key at `i` (emitting it); returns the index after its `:`.
    private mutating func key(at i: Int) throws -> Int {
        guard isKeyAhead(i) else { throw Unsupported() }
        var j = i
        while b[j] != 0x3A { j += 1 }
        try emit(i, j, isPlain: true)
        return j + 1
    }

    /// Reads the value after a key's `:` (or an entry's `- `) at `from`, emitting it. Returns false
    /// when the line ends there (a nested block, or a null). Only the value and an optional comment
    /// may follow.
    private mutating func value(from: Int, parentIndent: Int, isItem: Bool = false) throws -> Bool {
        var i = from
        while i < lineEnd && b[i] == 0x20 { i += 1 }
        if i == lineEnd || b[i] == 0x23 {
            guard i == lineEnd || i > from else { throw Unsupported() }  // `key:#` is a plain scalar
            return false
        }
        guard isItem || i > from else { throw Unsupported() }
        let end: Int
        if b[i] == 0x22 {  // "double-quoted", without escapes
            var j = i + 1
            while j < lineEnd && b[j] != 0x22 {
                guard b[j] != 0x5C else { throw Unsupported() }
                j += 1
            }
            guard j < lineEnd else { throw Unsupported() }  // continues on the next line
            try emit(i + 1, j, isPlain: false, markAt: i)
            end = j + 1
        } else {
            guard FastManifestScanner.canStartPlain(b[i], next: i + 1 < lineEnd ? b[i + 1] : 0x20) else { throw Unsupported() }
            var j = i
            while j < lineEnd && b[j] != 0x20 {
                // `#` and `: ` have meanings libyaml resolves; leave them to it.
                guard b[j] != 0x23, !(b[j] == 0x3A && (j + 1 == lineEnd || b[j + 1] == 0x20)) else { throw Unsupported() }
                j += 1
            }
            try emit(i, j, isPlain: true)
            end = j
        }
        // Only spaces, then optionally a comment (which needs a space before its `#`).
        var k = end
        while k < lineEnd && b[k] == 0x20 { k += 1 }
        guard k == lineEnd || (b[k] == 0x23 && k > end) else { throw Unsupported() }
        return true
    }

    private mutating func emit(_ start: Int, _ end: Int, isPlain: Bool, markAt: Int? = nil) throws {
        let mark = markAt ?? start
        try builder.scalar(UnsafeBufferPointer(rebasing: b[start..<end]), isPlain: isPlain, line: lineNumber,
                           column: Int32(mark - lineStart + 1))
    }

    private static func isKeyByte(_ c: UInt8, first: Bool) -> Bool {
        (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || c == 0x5F || (!first && c >= 0x30 && c <= 0x39)
    }

    /// A plain scalar may start with a letter, digit or one of `_ . / ~ +`, or with `-` not followed
    /// by a space; every other indicator (`- ? : , [ ] { } # & * ! | > ' " % @ \``) goes to libyaml.
    private static func canStartPlain(_ c: UInt8, next: UInt8) -> Bool {
        if (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || (c >= 0x30 && c <= 0x39) { return true }
        if c == 0x5F || c == 0x2E || c == 0x2F || c == 0x7E || c == 0x2B { return true }
        return c == 0x2D && next != 0x20
    }

    // MARK: - Characters

    /// True when every character is one libyaml reads as it is: printable ASCII, newlines, and
    /// well-formed UTF-8 of printable characters (YAML 1.1 §5.1, libyaml's `IS_PRINTABLE`) other than
    /// the byte-order mark and the characters YAML 1.1 counts as line breaks (U+0085, U+2028, U+2029).
    static func isPlainText(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        let n = b.count
        while i < n {
            let c = b[i]
            if c < 0x80 {
                guard c == 0x0A || (c >= 0x20 && c < 0x7F) else { return false }
                i += 1
                continue
            }
            var scalar: UInt32
            var length: Int
            if c & 0xE0 == 0xC0 { scalar = UInt32(c & 0x1F); length = 2 }
            else if c & 0xF0 == 0xE0 { scalar = UInt32(c & 0x0F); length = 3 }
            else if c & 0xF8 == 0xF0 { scalar = UInt32(c & 0x07); length = 4 }
            else { return false }
            guard i + length <= n else { return false }
            for k in 1..<length {
                let d = b[i + k]
                guard d & 0xC0 == 0x80 else { return false }
                scalar = scalar << 6 | UInt32(d & 0x3F)
            }
            // Overlong forms, surrogates, and what libyaml does not print or breaks lines on.
            let minimum: UInt32 = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000
            guard scalar >= minimum, scalar <= 0x10FFFF else { return false }
            guard scalar >= 0xA0, scalar != 0xFEFF, scalar != 0x2028, scalar != 0x2029,
                  !(scalar >= 0xD800 && scalar <= 0xDFFF), scalar != 0xFFFE, scalar != 0xFFFF else { return false }
            i += length
        }
        return true
    }
}
