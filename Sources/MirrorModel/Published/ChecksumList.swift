/// A checksum list as publishers ship it beside their files: `SHA256SUMS` or `SHA512SUMS`, in the
/// format `sha256sum` and `sha512sum` write and `--check` reads (GNU coreutils, "md5sum
/// invocation"), and the BSD tag format some write instead (docs/manifest.md, "Checksum lists").
///
/// Accepted, line by line:
/// - `DIGEST  NAME` (text mode) and `DIGEST *NAME` (binary mode: the same bytes on POSIX);
/// - `SHA256 (NAME) = DIGEST` and `SHA512 (NAME) = DIGEST` (`--tag`);
/// - a line starting with `\`: NAME is escaped, `\\` for a backslash and `\n` for a newline;
/// - empty lines, and comments from `#` (Fedora's `CHECKSUM` files say each file's size in one:
///   `# NAME: SIZE bytes`, which saves asking the server for it).
///
/// Anything else is an error naming the line: a list read by a machine that syncs every byte
/// must not be half understood. A name starting with `./` loses it; every name then passes the
/// manifest's path rules (no `..`, not absolute, no control characters, not in `.mirror`), and
/// appears once. All digests have one algorithm, told by their length (64 or 128 hex digits).
/// Sizes are not in the list (but for those comments): they are asked of the server before the
/// first byte (`PublishedList` in MirrorCore), so that the space check still comes first.
public struct ChecksumList: Sendable, Equatable {
    public struct File: Sendable, Equatable {
        /// The name as a relative path under the destination (bytes of UTF-8, checked).
        public var path: String
        public var digest: Digest
        /// 1-based line in the list, for messages.
        public var line: Int
        /// From a `# NAME: SIZE bytes` comment, when the list has one.
        public var size: Int64?
    }

    public var algorithm: DigestAlgorithm
    public var files: [File]

    /// The most lines a list may have: as many as a manifest's entries.
    static let maximumFiles = 1 << 28

    /// Whether `bytes` read as a checksum list rather than a YAML manifest or a Metalink file: the
    /// first line that is not empty or a comment is a checksum line, or the text is clearsigned.
    /// A YAML manifest's first line is a key (`version: 1`), never 64 hex digits and a space.
    public static func looksLike(_ bytes: [UInt8]) -> Bool {
        if ClearSigned.isClearSigned(bytes) { return true }
        for (text, _) in Lines(bytes: bytes[...]).prefix(64) {
            if text.isEmpty || text.first == UInt8(ascii: "#") { continue }
            return (try? parseLine(text)) != nil
        }
        return false
    }

    /// Parses a list (its signed text when it is clearsigned: ``ClearSigned/text(of:)``).
    public static func parse(_ bytes: [UInt8], sourceName: String) throws -> ChecksumList {
        var files: [File] = []
        var algorithm: DigestAlgorithm?
        var seen = Set<String>()
        var sizes: [String: Int64] = [:]
        for (text, number) in Lines(bytes: bytes[...]) {
            func fail(_ message: String) -> ManifestError { ManifestError(file: sourceName, line: number, message: message) }
            if text.isEmpty { continue }
            if text.first == UInt8(ascii: "#") {
                if let (name, size) = sizeComment(text) { sizes[name] = size }
                continue
            }
            let line: (hex: ArraySlice<UInt8>, name: [UInt8], tag: DigestAlgorithm?)?
            do { line = try parseLine(text) } catch {
                throw fail("the name is escaped (the line starts with \"\\\") but holds a backslash that is not \"\\\\\" or \"\\n\"")
            }
            guard let parsed = line else {
                throw fail("not a checksum line: expected \"DIGEST  NAME\" (sha256sum's format) or \"SHA256 (NAME) = DIGEST\"")
            }
            guard let lineAlgorithm = DigestAlgorithm.allCases.first(where: { $0.byteCount * 2 == parsed.hex.count }) else {
                throw fail("the digest has \(parsed.hex.count) hex digits; a SHA-256 digest has 64 and a SHA-512 digest 128")
            }
            if let tagged = parsed.tag, tagged != lineAlgorithm {
                throw fail("the digest has \(parsed.hex.count) hex digits, which is not \(tagged.displayName)")
            }
            if let algorithm, algorithm != lineAlgorithm {
                throw fail("this line has a \(lineAlgorithm.displayName) digest where the lines before have \(algorithm.displayName); a list holds one kind")
            }
            algorithm = lineAlgorithm
            guard let digest = Digest(hex: String(decoding: parsed.hex, as: UTF8.self), byteCount: lineAlgorithm.byteCount) else {
                throw fail("the digest is not hexadecimal")
            }
            var name = parsed.name[...]
            while name.starts(with: "./".utf8) { name = name.dropFirst(2) }
            guard let path = String(validating: name, as: UTF8.self) else { throw fail("the name is not UTF-8") }
            if let problem = ManifestRules.pathProblem(name) { throw fail(problem(quoted(path))) }
            guard seen.insert(path).inserted else { throw fail("\(quoted(path)) is listed twice") }
            guard files.count < maximumFiles else { throw fail("more than \(maximumFiles) files") }
            files.append(File(path: path, digest: digest, line: number))
        }
        guard let algorithm, !files.isEmpty else {
            throw ManifestError(file: sourceName, message: "the checksum list names no file")
        }
        if !sizes.isEmpty {
            for index in files.indices { files[index].size = sizes[files[index].path] }
        }
        return ChecksumList(algorithm: algorithm, files: files)
    }

    /// One checksum line: its digest's hex digits, its name (unescaped) and, for the BSD tag
    /// format, the algorithm it names. nil when the line is none of the accepted forms; throws
    /// for an escape that is not `\\` or `\n`.
    static func parseLine(_ text: ArraySlice<UInt8>) throws -> (hex: ArraySlice<UInt8>, name: [UInt8], tag: DigestAlgorithm?)? {
        var line = text
        let escaped = line.first == UInt8(ascii: "\\")
        if escaped { line = line.dropFirst() }
        let parsed: (hex: ArraySlice<UInt8>, name: ArraySlice<UInt8>, tag: DigestAlgorithm?)
        if let tagged = bsdLine(line) {
            parsed = tagged
        } else {
            guard let space = line.firstIndex(of: UInt8(ascii: " ")), space > line.startIndex,
                  line[..<space].allSatisfy({ ManifestRules.hexValue($0) != nil }) else { return nil }
            let marker = line.index(after: space)
            guard marker < line.endIndex, line[marker] == UInt8(ascii: " ") || line[marker] == UInt8(ascii: "*") else { return nil }
            parsed = (line[..<space], line[line.index(after: marker)...], nil)
        }
        guard !parsed.name.isEmpty else { return nil }
        return (parsed.hex, escaped ? try unescape(parsed.name) : Array(parsed.name), parsed.tag)
    }

    /// `SHA256 (NAME) = DIGEST`: the last ` = ` ends the name, which may hold parentheses.
    private static func bsdLine(_ line: ArraySlice<UInt8>) -> (hex: ArraySlice<UInt8>, name: ArraySlice<UInt8>, tag: DigestAlgorithm?)? {
        let tags: [(String, DigestAlgorithm)] = [("SHA256 (", .sha256), ("SHA512 (", .sha512)]
        guard let (prefix, algorithm) = tags.first(where: { line.starts(with: $0.0.utf8) }) else { return nil }
        let rest = line.dropFirst(prefix.utf8.count)
        let separator = Array(") = ".utf8)
        var found: ArraySlice<UInt8>.Index?
        var index = rest.startIndex
        while index + separator.count <= rest.endIndex {
            if rest[index ..< index + separator.count].elementsEqual(separator) { found = index }
            index += 1
        }
        guard let end = found else { return nil }
        let hex = rest[(end + separator.count)...]
        guard !hex.isEmpty, hex.allSatisfy({ ManifestRules.hexValue($0) != nil }) else { return nil }
        return (hex, rest[..<end], algorithm)
    }

    /// coreutils' escaping of names that hold a newline or a backslash.
    private static func unescape(_ name: ArraySlice<UInt8>) throws -> [UInt8] {
        var out: [UInt8] = []
        var iterator = name.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "\\") else { out.append(byte); continue }
            switch iterator.next() {
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "n"): out.append(UInt8(ascii: "\n"))
            case UInt8(ascii: "r"): out.append(UInt8(ascii: "\r"))
            default: throw UnknownEscape()
            }
        }
        return out
    }

    struct UnknownEscape: Error {}

    /// `# NAME: SIZE bytes` (Fedora's `CHECKSUM` files).
    private static func sizeComment(_ text: ArraySlice<UInt8>) -> (String, Int64)? {
        let words = text.dropFirst().split(separator: UInt8(ascii: " "))
        guard words.count == 3, words[0].last == UInt8(ascii: ":"), words[2].elementsEqual("bytes".utf8),
              let size = Int64(String(decoding: words[1], as: UTF8.self)), size >= 0, size <= ManifestEntry.largestSize,
              let name = String(validating: words[0].dropLast(), as: UTF8.self) else { return nil }
        return (name.hasPrefix("./") ? String(name.dropFirst(2)) : name, size)
    }

    /// The lines of a text, without `\n` or a `\r\n` ending, numbered from 1.
    struct Lines: Sequence, IteratorProtocol {
        var bytes: ArraySlice<UInt8>
        var number = 0

        mutating func next() -> (ArraySlice<UInt8>, Int)? {
            guard !bytes.isEmpty else { return nil }
            number += 1
            let end = bytes.firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
            var line = bytes[..<end]
            bytes = end == bytes.endIndex ? [] : bytes[(end + 1)...]
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            return (line, number)
        }
    }
}

extension DigestAlgorithm {
    /// The name a person reads: SHA-256, SHA-512.
    var displayName: String {
        switch self {
        case .sha256: "SHA-256"
        case .sha512: "SHA-512"
        }
    }
}
