import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// Credentials by host from a netrc file (`--netrc-file`), looked up by `mirror` itself, for the
/// origins ``CredentialScope`` allows: those the manifest names, never a `--prefer` source.
///
/// Why not libcurl's `CURLOPT_NETRC`: libcurl consults the netrc again for every redirect target
/// by host name, so a redirect to the same host on another port (another origin, possibly another
/// service) received the password (seen with libcurl 7.88; CredentialTests proves the fix), and
/// its netrc handling has had leaks on redirect before (CVE-2024-11053); it also matches by host
/// name alone, so a neighbour on another port, or any host at all for a `default` entry, would get
/// the password. Here the entry for the original URL's host, when ``CredentialScope`` allows its
/// origin, is handed to libcurl as `CURLOPT_USERNAME`/`CURLOPT_PASSWORD`, which libcurl treats like
/// URL credentials: sent only to that scheme, host and port, never after a redirect elsewhere
/// (`CURLOPT_UNRESTRICTED_AUTH` = 0).
///
/// The format (as curl and ftp read it): whitespace-separated tokens `machine NAME`, `default`,
/// `login NAME`, `password SECRET`, `account X`, and `macdef NAME` whose body runs to the next
/// empty line; a token may be double-quoted with `\"` and `\\` escapes.
public struct Netrc: Sendable {
    public struct Entry: Sendable {
        /// nil for `default`.
        public var machine: String?
        public var login: String?
        public var password: String?
    }

    public let path: String
    public let entries: [Entry]

    /// A netrc file that cannot be read or parsed. The message names the file and the line, never a value.
    public struct Failure: Error, CustomStringConvertible {
        public var path: String
        public var reason: String
        public var description: String { "--netrc-file \(path): \(reason)" }
    }

    public static func load(path: String) throws -> Netrc {
        let bytes: [UInt8]
        do {
            bytes = try WholeFile.read(path)
        } catch let failure as WholeFile.Failure {
            throw Failure(path: path, reason: "cannot read it: " + String(cString: strerror(failure.errno)))
        }
        return try Netrc(path: path, text: String(decoding: bytes, as: UTF8.self))
    }

    public init(path: String, text: String) throws {
        self.path = path
        var entries: [Entry] = []
        var tokens = Netrc.tokens(text)[...]
        func value(after keyword: String, line: Int) throws -> String {
            guard let next = tokens.popFirst() else {
                throw Failure(path: path, reason: "line \(line): `\(keyword)` has no value")
            }
            return next.text
        }
        while let token = tokens.popFirst() {
            switch token.text {
            case "machine":
                entries.append(Entry(machine: try value(after: "machine", line: token.line).lowercased()))
            case "default":
                entries.append(Entry(machine: nil))
            case "login", "password", "account":
                let text = try value(after: token.text, line: token.line)
                guard !entries.isEmpty else {
                    throw Failure(path: path, reason: "line \(token.line): `\(token.text)` before any `machine` or `default`")
                }
                if token.text == "login" { entries[entries.count - 1].login = text }
                if token.text == "password" { entries[entries.count - 1].password = text }
            case "macdef":
                _ = try value(after: "macdef", line: token.line)
                // The macro body (up to an empty line) was dropped by the tokenizer.
            default:
                throw Failure(path: path, reason: "line \(token.line): unexpected token (expected machine, default, login, password, account or macdef)")
            }
        }
        self.entries = entries
    }

    /// The login and password ``CredentialScope`` allows for one request: the `machine` entry for
    /// its host (case-insensitive), and the `default` entry only where the scope says so (the
    /// manifest URL's origin); nil when there is none, or it has no password.
    public func credentials(for lookup: CredentialScope.Lookup) -> (login: String, password: String)? {
        let entry: Entry?
        switch lookup {
        case .none:
            return nil
        case .machine(let host):
            let host = host.lowercased()
            entry = entries.first { $0.machine == host }
        case .machineOrDefault(let host):
            let host = host.lowercased()
            entry = entries.first { $0.machine == host } ?? entries.first { $0.machine == nil }
        }
        guard let entry, let password = entry.password else { return nil }
        return (entry.login ?? "", password)
    }

    struct Token {
        var text: String
        var line: Int
    }

    /// Splits into tokens with their line numbers; skips `macdef` bodies (to the next empty line).
    static func tokens(_ text: String) -> [Token] {
        var tokens: [Token] = []
        var current: [Character] = []
        var line = 1
        var quoted = false
        var escaped = false
        var inToken = false
        var skippingMacro = false
        var previousWasNewline = false
        func flush() {
            if inToken { tokens.append(Token(text: String(current), line: line)) }
            current = []
            inToken = false
        }
        for character in text {
            if skippingMacro {
                if character == "\n" {
                    if previousWasNewline { skippingMacro = false }
                    previousWasNewline = true
                    line += 1
                } else if character != "\r" {
                    previousWasNewline = false
                }
                continue
            }
            if quoted {
                if escaped {
                    current.append(character == "n" ? "\n" : character == "t" ? "\t" : character)
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    quoted = false
                } else {
                    if character == "\n" { line += 1 }
                    current.append(character)
                }
                continue
            }
            if character.isWhitespace {
                flush()
                if character == "\n" || character == "\r\n" {
                    // A macdef's name is the token after it; its body starts on the next line.
                    if tokens.count >= 2 && tokens[tokens.count - 2].text == "macdef" && tokens.last?.line == line {
                        skippingMacro = true
                        previousWasNewline = true
                    }
                    line += 1
                }
                continue
            }
            if character == "\"" && !inToken {
                quoted = true
                inToken = true
                continue
            }
            current.append(character)
            inToken = true
        }
        flush()
        return tokens
    }
}

extension Netrc: CustomStringConvertible {
    /// Names the file and the machines, never a login's password.
    public var description: String {
        "Netrc(\(path): \(entries.map { $0.machine ?? "default" }.joined(separator: ", ")))"
    }
}
