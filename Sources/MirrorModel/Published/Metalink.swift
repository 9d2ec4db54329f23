/// A Metalink 4 file (RFC 5854, `.meta4`): each file's name, size, hashes and the URLs that serve
/// it, as openSUSE, LibreOffice and mirror networks publish them (docs/manifest.md, "Metalink").
///
/// What mirror takes from it (RFC 5854 §4): `<file name>` as the path (§4.1.2.1: it may hold
/// folders, never `..` or a leading `/`, checked as a manifest's paths are), `<size>` (required
/// here: the space check comes before the first byte), `<hash type="sha-256">` and `"sha-512"` (at
/// least one: the whole-file digest is the last word on every byte), `<url>` in `priority` order
/// (§4.2.16.2: 1 first; none given, last), and `<pieces>` (a length, as many piece hashes as the
/// size needs, each of its type's length), which a download checks as the bytes land (``PieceHashes``). Hashes of other types (`md5`, `sha-1`) are skipped: they never
/// accept bytes. URLs of schemes mirror does not speak (`ftp`, `rsync`) and `<metaurl>` (torrents)
/// are skipped; a file left with no URL is an error. Metalink 3 (`http://www.metalinker.org/`) is
/// refused with its name. A document type declaration is refused before parsing (``XMLReader``).
public struct Metalink: Sendable, Equatable {
    public struct File: Sendable, Equatable {
        public var path: String
        public var size: Int64
        public var digests: DigestSet
        /// Absolute URLs, best priority first.
        public var urls: [String]
        public var pieces: Pieces?
        public var line: Int
    }

    /// `<pieces length="L" type="T">`: a hash of each L bytes. A type mirror computes
    /// (``PieceHashes/Kind``) must have digests of its length; another type is kept as read and
    /// not used.
    public struct Pieces: Sendable, Equatable {
        public var length: Int64
        public var type: String
        public var hashes: [String]

        /// The piece hashes a download checks, or nil for a type mirror does not compute.
        func checked() -> PieceHashes? {
            guard let kind = PieceHashes.Kind(rawValue: type.lowercased()) else { return nil }
            let digests = hashes.compactMap { Digest(hex: $0, byteCount: kind.byteCount)?.bytes }
            guard digests.count == hashes.count else { return nil }
            return PieceHashes(kind: kind, length: length, hashes: digests)
        }
    }

    public var files: [File]

    static let namespace = "urn:ietf:params:xml:ns:metalink"
    static let version3Namespace = "http://www.metalinker.org/"
    /// A larger file is refused before it is parsed: 10^5 files with ten mirrors each are 30 MB.
    public static let sizeLimit = 64 << 20
    static let schemes = ["http", "https", "file"]

    /// Whether `bytes` are XML (after a UTF-8 byte-order mark and white space, `<?xml`, `<metalink`
    /// or a comment).
    public static func looksLike(_ bytes: [UInt8]) -> Bool {
        var rest = bytes[...]
        if rest.starts(with: [0xEF, 0xBB, 0xBF]) { rest = rest.dropFirst(3) }
        rest = rest.drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        return rest.starts(with: "<?xml".utf8) || rest.starts(with: "<metalink".utf8) || rest.starts(with: "<!--".utf8)
    }

    public static func parse(_ bytes: [UInt8], sourceName: String) throws -> Metalink {
        guard bytes.count <= sizeLimit else {
            throw ManifestError(file: sourceName, message: "the Metalink file is larger than \(sizeLimit >> 20) MiB; mirror reads none so large")
        }
        // Refused on its bytes, before libxml2 sees them: its reader parses ahead of the nodes it
        // returns, so a DTD's entities would be expanded in an attribute before the node said so.
        for marker in ["<!DOCTYPE", "<!ENTITY"] where bytes.firstRange(of: Array(marker.utf8)) != nil {
            throw ManifestError(file: sourceName, message: MetalinkParser.doctypeMessage)
        }
        var parser = MetalinkParser(sourceName: sourceName)
        do {
            let reader = try XMLReader(bytes: bytes)
            try parser.read(reader)
        } catch let failure as XMLReader.Failure {
            throw ManifestError(file: sourceName, line: failure.line, message: "not a well-formed XML document: \(failure.message)")
        }
        return Metalink(files: parser.files)
    }

    /// The manifest these files make: each entry's URLs tried in order (``ManifestEntry/Location/mirrored(_:)``).
    public func manifest(sourceName: String) -> Manifest {
        let entries = files.map { file in
            var entry = ManifestEntry(path: file.path, url: .mirrored(file.urls), size: file.size, digests: file.digests, line: file.line)
            entry.pieces = file.pieces?.checked()
            return entry
        }
        return Manifest(sourceName: sourceName, entries: entries)
    }
}

/// The state of one pass over a Metalink document: which element is open, and the file being read.
struct MetalinkParser {
    let sourceName: String
    var files: [Metalink.File] = []
    private var seen = Set<String>()
    private var total: Int64 = 0

    init(sourceName: String) {
        self.sourceName = sourceName
    }

    static let doctypeMessage = "a Metalink file must not have a document type declaration (<!DOCTYPE>) or entities: mirror never expands them"

    /// A file as its elements come: every field optional until `</file>`.
    private struct OpenFile {
        var name: String
        var line: Int
        var size: Int64?
        var digests = DigestSet()
        var urls: [(url: String, priority: Int)] = []
        var pieces: Metalink.Pieces?
    }

    func fail(_ message: String, line: Int?) -> ManifestError {
        ManifestError(file: sourceName, line: line, message: message)
    }

    mutating func read(_ reader: XMLReader) throws {
        var path: [String] = []
        var text = ""
        var file: OpenFile?
        var attributes: [String: String] = [:]
        var sawRoot = false
        while let node = try reader.next() {
            switch node {
            case .doctype:
                throw fail(Self.doctypeMessage, line: reader.line)
            case .start(let name, let namespace, let attrs, let isEmpty):
                if path.isEmpty {
                    guard name == "metalink", namespace == Metalink.namespace else {
                        if namespace == Metalink.version3Namespace {
                            throw fail("this is a Metalink 3 file (\(Metalink.version3Namespace)); mirror reads Metalink 4 (RFC 5854, urn:ietf:params:xml:ns:metalink)", line: reader.line)
                        }
                        throw fail("not a Metalink 4 file: the root element is <\(name)> in namespace \"\(namespace)\", not <metalink> in \(Metalink.namespace)", line: reader.line)
                    }
                    sawRoot = true
                }
                // Elements of other namespaces (extensions, §4.3) are skipped with their content.
                let ours = namespace == Metalink.namespace
                if ours, path == ["metalink"], name == "file" {
                    guard let fileName = attrs["name"], !fileName.isEmpty else { throw fail("<file> has no name attribute", line: reader.line) }
                    file = OpenFile(name: fileName, line: reader.line)
                }
                if ours, path == ["metalink", "file"], name == "pieces" { try startPieces(attrs, into: &file, line: reader.line) }
                attributes = attrs
                text = ""
                if !isEmpty { path.append(ours ? name : "{\(namespace)}\(name)") } else {
                    try end(name: name, path: path + [name], text: "", attributes: attrs, file: &file, line: reader.line)
                }
            case .text(let value):
                text += value
            case .end(let name):
                try end(name: name, path: path, text: text, attributes: attributes, file: &file, line: reader.line)
                path.removeLast()
                text = ""
            }
        }
        if !sawRoot { throw fail("empty document: no <metalink> element", line: nil) }
        if files.isEmpty { throw fail("the Metalink file lists no <file>", line: nil) }
    }

    private mutating func startPieces(_ attrs: [String: String], into file: inout OpenFile?, line: Int) throws {
        guard let length = attrs["length"].flatMap({ Int64($0) }), length > 0 else {
            throw fail("<pieces> needs a length attribute, a whole number above 0", line: line)
        }
        guard let type = attrs["type"], !type.isEmpty else { throw fail("<pieces> needs a type attribute (sha-256, sha-1, ...)", line: line) }
        file?.pieces = Metalink.Pieces(length: length, type: type, hashes: [])
    }

    private mutating func end(name: String, path: [String], text: String, attributes: [String: String],
                              file: inout OpenFile?, line: Int) throws {
        let value = text.trimmingWhiteSpace()
        switch path {
        case ["metalink", "file", "size"]:
            guard let size = Int64(value), size >= 0, size <= ManifestEntry.largestSize else {
                throw fail("<size> must be a whole number of bytes from 0 to 2^62, got \(quoted(value))", line: line)
            }
            file?.size = size
        case ["metalink", "file", "hash"]:
            guard let type = attributes["type"] else { throw fail("<hash> has no type attribute", line: line) }
            let algorithm: DigestAlgorithm? = switch type.lowercased() {
            case "sha-256": .sha256
            case "sha-512": .sha512
            default: nil
            }
            guard let algorithm else { return }
            guard let digest = Digest(hex: value, byteCount: algorithm.byteCount) else {
                throw fail("<hash type=\"\(type)\"> must be \(algorithm.byteCount * 2) hex digits, got \(quoted(value))", line: line)
            }
            file?.digests[algorithm] = digest
        case ["metalink", "file", "pieces", "hash"]:
            file?.pieces?.hashes.append(value)
        case ["metalink", "file", "url"]:
            let priority = attributes["priority"].flatMap { Int($0) } ?? Int.max
            let scheme = value.prefix { $0 != ":" }.lowercased()
            guard value.contains("://"), Metalink.schemes.contains(scheme) else { return }
            guard URLReference.split(value) != nil else { throw fail("<url> \(quoted(value)) is not a valid URL", line: line) }
            file?.urls.append((value, priority))
        case ["metalink", "file"]:
            guard let open = file else { return }
            files.append(try finish(open))
            file = nil
        default:
            break
        }
    }

    private mutating func finish(_ open: OpenFile) throws -> Metalink.File {
        let shown = quoted(open.name)
        if let problem = ManifestRules.pathProblem(Array(open.name.utf8)[...]) { throw fail(problem(shown), line: open.line) }
        guard seen.insert(open.name).inserted else { throw fail("\(shown) is listed twice", line: open.line) }
        guard let size = open.size else {
            throw fail("file \(shown) has no <size>; mirror needs each size before the first byte (the space check)", line: open.line)
        }
        guard !open.digests.isEmpty else {
            throw fail("file \(shown) has no <hash type=\"sha-256\"> or \"sha-512\"; mirror checks every byte against one", line: open.line)
        }
        let urls = open.urls.enumerated().sorted { ($0.element.priority, $0.offset) < ($1.element.priority, $1.offset) }.map(\.element.url)
        guard !urls.isEmpty else { throw fail("file \(shown) has no http, https or file <url>", line: open.line) }
        if let pieces = open.pieces {
            let needed = size == 0 ? 0 : (size - 1) / pieces.length + 1
            guard Int64(pieces.hashes.count) == needed else {
                throw fail("file \(shown): <pieces length=\"\(pieces.length)\"> has \(pieces.hashes.count) hashes where its size needs \(needed)", line: open.line)
            }
            if let kind = PieceHashes.Kind(rawValue: pieces.type.lowercased()),
               let bad = pieces.hashes.firstIndex(where: { Digest(hex: $0, byteCount: kind.byteCount) == nil }) {
                throw fail("file \(shown): piece hash \(bad + 1) of type \(kind.rawValue) must be \(kind.byteCount * 2) hex digits, got \(quoted(pieces.hashes[bad]))",
                           line: open.line)
            }
        }
        guard case let (sum, overflow) = total.addingReportingOverflow(size), !overflow, sum <= Manifest.largestTotal else {
            throw fail("the sizes add up to more than 2^62 bytes", line: open.line)
        }
        total = sum
        return Metalink.File(path: open.name, size: size, digests: open.digests, urls: urls, pieces: open.pieces, line: open.line)
    }
}

private extension String {
    func trimmingWhiteSpace() -> String {
        let scalars = unicodeScalars
        let isSpace: (Unicode.Scalar) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard let first = scalars.firstIndex(where: { !isSpace($0) }), let last = scalars.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(scalars[first ... last])
    }
}
