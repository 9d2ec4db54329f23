/// A manifest that breaks a rule of `docs/manifest.md`, or cannot be read at all.
///
/// The spec requires every broken rule to be reported as `FILE:LINE:COLUMN: message` so a person can
/// go straight to the offending node; `line`/`column` are nil only when there is no position
/// (unreadable file, corrupt gzip).
public struct ManifestError: Error, CustomStringConvertible, Equatable, Sendable {
    /// The manifest's name as the user gave it.
    public var file: String
    /// 1-based line, or nil when the error has no position.
    public var line: Int?
    /// 1-based column (in characters, as libyaml counts them), or nil.
    public var column: Int?
    public var message: String
    /// The manifest file could not be read at all (missing, not readable, a folder): nothing is
    /// known of its contents. Exit 66 (`EX_NOINPUT`) rather than an invalid manifest's 65.
    public var cannotRead = false

    public init(file: String, line: Int? = nil, column: Int? = nil, message: String, cannotRead: Bool = false) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
        self.cannotRead = cannotRead
    }

    /// `FILE:LINE:COL: message`, or `FILE: message` when there is no position.
    public var description: String {
        switch (line, column) {
        case let (line?, column?): return "\(file):\(line):\(column): \(message)"
        case let (line?, nil): return "\(file):\(line): \(message)"
        default: return "\(file): \(message)"
        }
    }
}

/// Quotes a value for a message: double quotes, with `"`, `\` and control characters escaped so that
/// what is printed is unambiguous and cannot disturb the terminal; long values are shortened.
func quoted(_ s: String, limit: Int = 120) -> String {
    var out = "\""
    var count = 0
    for scalar in s.unicodeScalars {
        if count == limit { out += "…"; break }
        count += 1
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\t": out += "\\t"
        case "\r": out += "\\r"
        default:
            if scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u{" + hex + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}
