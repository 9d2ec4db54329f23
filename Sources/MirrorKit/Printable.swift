extension Formatting {
    /// Text as it may reach a person's terminal: every character a terminal would act on rather than
    /// show is written as an escape, so a file name or a journal record cannot move the cursor,
    /// retitle the window, clear the screen or fake a line of output (SECURITY.md).
    ///
    /// - C0 controls (U+0000–U+001F) and DEL: `\n`, `\r`, `\t`, else `\x1b`-style (ECMA-48 reads
    ///   ESC, CSI introducers and BEL from these).
    /// - C1 controls (U+0080–U+009F): `\u{9B}`-style; U+009B is a one-character CSI for a terminal
    ///   that honours 8-bit controls.
    /// - Line and paragraph separators (U+2028, U+2029) and the bidirectional formatting characters
    ///   (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which reorder what follows them
    ///   on screen ("Trojan Source", CVE-2021-42574): `\u{202E}`-style.
    ///
    /// Everything else, including every other non-ASCII letter, is kept. A backslash is kept as is,
    /// so text that is already escaped (``quoted(_:limit:)``) is not escaped twice; the price is
    /// that a name holding a literal `\x1b` prints like one holding ESC. Swift strings hold valid
    /// Unicode only: for bytes that may not be UTF-8 (names read from disk) use ``printable(bytes:)``.
    public static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if needsEscape(scalar) { out.append(contentsOf: escape(scalar).unicodeScalars) } else { out.append(scalar) }
        }
        return String(out)
    }

    /// ``printable(_:)`` for bytes, such as a file name from `readdir(3)`: valid UTF-8 is decoded
    /// and escaped as there, and each byte that is not part of valid UTF-8 is written `\xff`-style
    /// (where `String(decoding:as:)` would show U+FFFD and hide which byte it was).
    public static func printable<Bytes: Collection>(bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var out = ""
        var rest = Array(bytes)[...]
        while !rest.isEmpty {
            var decoder = UTF8()
            var iterator = rest.makeIterator()
            var consumed = 0
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar):
                consumed = UTF8.width(scalar)
                out += needsEscape(scalar) ? escape(scalar) : String(scalar)
            case .error, .emptyInput:
                consumed = 1
                out += "\\x" + hex(UInt32(rest[rest.startIndex]), digits: 2)
            }
            rest = rest.dropFirst(consumed)
        }
        return out
    }

    /// A line for people: credentials masked (``redactingURLs(in:)``), then ``printable(_:)``.
    /// Every sink that prints for a person goes through it (`ConsoleReport`, `RunLog`,
    /// `mirror status`, the progress display).
    public static func forPeople(_ text: String) -> String {
        printable(redactingURLs(in: text))
    }

    package static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1f, 0x7f...0x9f: return true
        case 0x061c, 0x200e, 0x200f, 0x2028, 0x2029, 0x202a...0x202e, 0x2066...0x2069: return true
        default: return false
        }
    }

    private static func escape(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "\n": return "\\n"
        case "\r": return "\\r"
        case "\t": return "\\t"
        default:
            let v = scalar.value
            return v < 0x80 ? "\\x" + hex(v, digits: 2) : "\\u{" + String(v, radix: 16, uppercase: true) + "}"
        }
    }

    private static func hex(_ v: UInt32, digits: Int) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }
}
