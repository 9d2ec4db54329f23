import FoundationEssentials
import MirrorKit

/// The one encoder behind `sync --json`, `status --json` and `verify --json` (docs/cli.md): each
/// command builds an `Encodable` document (``SyncDocument``, ``StatusDocument``,
/// ``VerifyDocument``) and prints ``render(_:)`` of it, so escaping, key order and number format
/// are decided here once instead of in three emitters built by hand.
///
/// - Keys are sorted (`.sortedKeys`). Foundation's `JSONEncoder` on Linux keeps an object's keys
///   in a hashed dictionary, whose order changes from one process to the next, so declaration
///   order cannot be kept and sorting is the only order a consumer (or a diff of two runs) can
///   rely on. Consumers read fields by name; docs/cli.md promises no order.
/// - Field names are spelled out in each document's `CodingKeys` where they are not the property
///   name (`bytes_transferred`), rather than derived by `.convertToSnakeCase`: the names are the
///   contract, and the derivation cost a third more time on a summary of 10^6 changed files.
/// - `/` is not escaped (`.withoutEscapingSlashes`): URLs stay as readable as in the text report.
/// - A string carries no character a terminal acts on, raw (SECURITY.md): see
///   ``escapingTerminalControls(_:)``.
public enum JSONOutput {
    /// A fresh encoder per call: `JSONEncoder` is a class with mutable settings, and a shared
    /// instance would be shared state across the threads that report.
    static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // A duration or share that is not finite is a bug upstream, but must not cost the run its
        // report: such a number is written as a string rather than failing the whole document.
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return encoder
    }

    /// The decoder that reads back what ``makeEncoder()`` writes (for tests and for any Swift
    /// consumer): the same strategy for numbers that are not finite.
    public static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return decoder
    }

    /// One line of JSON (RFC 8259), without a final newline.
    ///
    /// The documents hold strings, integers, finite-or-stringified doubles, booleans, nulls,
    /// arrays and objects, which `JSONEncoder` cannot fail on; should a future document make it
    /// fail, the answer is still one JSON object, naming the failure, rather than a crash or
    /// output that is not JSON.
    public static func render<Document: Encodable>(_ document: Document) -> String {
        do {
            let data = try makeEncoder().encode(document)
            return escapingTerminalControls(String(decoding: data, as: UTF8.self))
        } catch {
            return "{\"error\":\"cannot encode the report: \(jsonStringBody(String(describing: error)))\"}"
        }
    }

    /// Elements encoded at a time by ``write(_:array:count:element:to:)``.
    static let streamingBatch = 4096

    /// ``render(_:)`` of `document` with the array under the top-level `array` key filled from
    /// `element(0..<count)` a batch at a time, written to `out` piece by piece: the same text as
    /// rendering the document with that array in it, without the whole array, its encoded form
    /// or the whole line ever in memory (a `status --json` of 10^6 missing files held 870 MB).
    ///
    /// `document` must encode that key as an empty array (`"entries":[]`); the elements are
    /// encoded by the same encoder, so escaping and number format match ``render(_:)``.
    static func write<Document: Encodable, Element: Encodable>(
        _ document: Document, array key: String, count: Int, element: (Int) -> Element,
        to out: (String) throws -> Void) rethrows {
        let whole = render(document)
        guard count > 0, let open = emptyArray(key, in: whole) else { return try out(whole) }
        let bytes = Array(whole.utf8)
        try out(String(decoding: bytes[...open], as: UTF8.self))
        let encoder = makeEncoder()
        var wroteAny = false
        func piece(_ data: Data) throws {
            // "[a,b]" without its brackets; a comma before every piece but the first.
            let inside = String(decoding: data.dropFirst().dropLast(), as: UTF8.self)
            try out((wroteAny ? "," : "") + escapingTerminalControls(inside))
            wroteAny = true
        }
        var start = 0
        while start < count {
            let end = min(count, start + streamingBatch)
            let batch = (start..<end).map(element)
            if let data = try? encoder.encode(batch), data.count > 2 {
                try piece(data)
            } else {
                // Never with the element types used (strings, integers, finite-or-stringified
                // doubles); should a future one fail, each element of the batch goes alone and one
                // that still fails becomes an object naming the failure, so the line stays JSON.
                for value in batch {
                    do {
                        try piece(try encoder.encode([value]))
                    } catch {
                        try piece(Data("[{\"error\":\"cannot encode this element: \(jsonStringBody(String(describing: error)))\"}]".utf8))
                    }
                }
            }
            start = end
        }
        try out(String(decoding: bytes[(open + 1)...], as: UTF8.self))
    }

    /// The offset of the `[` of `"key":[]` among the top-level members of the object `json`,
    /// found by following strings and nesting (a value may hold the same characters).
    static func emptyArray(_ key: String, in json: String) -> Int? {
        let bytes = Array(json.utf8), pattern = Array("\"\(key)\":[]".utf8)
        var depth = 0, inString = false, escaped = false, i = 0
        while i < bytes.count {
            let byte = bytes[i]
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
            } else {
                switch byte {
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
                case UInt8(ascii: "\""):
                    if depth == 1, bytes[i...].starts(with: pattern) { return i + pattern.count - 2 }
                    inString = true
                default: break
                }
            }
            i += 1
        }
        return nil
    }

    /// `text` as the inside of a JSON string (RFC 8259 §7): `"`, `\` and every control escaped,
    /// and the scalars ``escapingTerminalControls(_:)`` escapes. Works on Unicode scalars: a `"`
    /// followed by a combining mark is one `Character` but still a quote to a JSON reader.
    static func jsonStringBody(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out.append(contentsOf: "\\\"".unicodeScalars)
            case "\\": out.append(contentsOf: "\\\\".unicodeScalars)
            case _ where scalar.value < 0x20 || Formatting.needsEscape(scalar): appendEscape(scalar, to: &out)
            default: out.append(scalar)
            }
        }
        return String(out)
    }

    /// Rewrites as `\uXXXX` every scalar of `json` that ``Formatting/needsEscape(_:)`` names and
    /// the encoder left raw: DEL, the C1 controls (U+009B is a one-character CSI), U+2028/U+2029
    /// and the bidi controls (U+202E, "Trojan Source"). `JSONEncoder` escapes only what RFC 8259
    /// §7 requires (C0, `"`, `\`), so without this a consumer printing a field (`jq -r`) would
    /// hand those characters to a terminal.
    ///
    /// Safe on the encoded text as a whole: outside string literals the encoder writes only ASCII
    /// punctuation, digits and the letters of `true`, `false` and `null`, none of which is
    /// escaped here, so every scalar replaced is inside a string, where `\uXXXX` means that scalar
    /// (all of them are in the Basic Multilingual Plane, so one escape each, no surrogates).
    static func escapingTerminalControls(_ json: String) -> String {
        guard json.unicodeScalars.contains(where: Formatting.needsEscape) else { return json }
        var out = String.UnicodeScalarView()
        for scalar in json.unicodeScalars {
            if Formatting.needsEscape(scalar) { appendEscape(scalar, to: &out) } else { out.append(scalar) }
        }
        return String(out)
    }

    /// `\uXXXX` (RFC 8259 §7) for a scalar of the Basic Multilingual Plane, as every scalar
    /// escaped here is.
    private static func appendEscape(_ scalar: Unicode.Scalar, to out: inout String.UnicodeScalarView) {
        let hex = String(scalar.value, radix: 16)
        out.append(contentsOf: ("\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex).unicodeScalars)
    }
}

/// An optional written as `null` when it is absent, where Swift's synthesized `Encodable` would
/// leave the key out: for the fields docs/cli.md documents as "null where unknown" (`source`,
/// `sync_pid`, `last_run`, the sizes and digests of a verify problem). A plain optional property
/// is the other case: its key is left out when absent (`reason`, `plan`, `exit_code`,
/// `partial_bytes`).
public struct OrNull<Wrapped: Codable & Equatable & Sendable>: Codable, Equatable, Sendable {
    public var value: Wrapped?

    public init(_ value: Wrapped?) { self.value = value }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        value = container.decodeNil() ? nil : try container.decode(Wrapped.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let value { try container.encode(value) } else { try container.encodeNil() }
    }
}
