import MirrorKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads and validates manifests (spec: `docs/manifest.md`). Every rule the spec lists is checked
/// here, so code downstream can trust a `Manifest`; the first broken rule is thrown as a
/// `ManifestError` with the position of the offending YAML node.
public enum ManifestLoader {
    /// Reads the file at `path` (gzip recognised by its magic bytes 1f 8b, never by name), then
    /// parses it. `displayName` (default: `path`) is the `FILE` of error messages.
    public static func load(path: String, displayName: String? = nil) throws -> Manifest {
        try load(path: path, displayName: displayName, reader: Reader())
    }

    /// The same, telling `observer` of each entry as soon as it has passed every rule that can
    /// be checked before the end of the file, with its index (``ManifestEntryStream``): a dry run
    /// plans them meanwhile (`PlanLookAhead`). Whether the manifest as a whole is valid is
    /// known only when this returns.
    package static func load(path: String, observer: @escaping EntryObserver) throws -> Manifest {
        var reader = Reader()
        reader.observer = observer
        return try load(path: path, reader: reader)
    }

    /// Told of entry `index` of `files` while the manifest is read.
    package typealias EntryObserver = (_ index: Int, _ entry: ManifestEntry) -> Void

    static func load(path: String, displayName: String? = nil, reader: Reader) throws -> Manifest {
        let name = displayName ?? path
        func read() throws -> [UInt8] {
            do {
                return try WholeFile.read(path)
            } catch let code as WholeFile.Failure {
                if code.errno == EISDIR {
                    throw ManifestError(file: name, message: "this is a folder, not a manifest file: give the manifest's path (FOLDER/manifest.yaml, say)",
                                        cannotRead: true)
                }
                throw ManifestError(file: name, message: "cannot read manifest: " + String(cString: strerror(code.errno)), cannotRead: true)
            }
        }
        // These bytes are this function's only: the scanner may give back the pages it has read
        // (10^6 entries: ~110 MB less at the peak). When it then leaves the file to libyaml, which
        // needs every byte, the file is read again and parsed from the start, as if for the first time.
        var bytes = try read()
        var releasing = reader
        if releasing.releaseStep == nil { releasing.releaseStep = FastManifestScanner.defaultReleaseStep }
        do {
            return try manifest(from: &bytes, sourceName: name, reader: releasing)
        } catch is FastManifestScanner.InputReleased {
            bytes = try read()
            var whole = reader
            whole.releaseStep = nil
            return try manifest(from: &bytes, sourceName: name, reader: whole)
        }
    }

    /// Parses bytes already in memory (also gunzips when they start with 1f 8b).
    public static func parse(_ bytes: [UInt8], sourceName: String) throws -> Manifest {
        var text = bytes
        return try manifest(from: &text, sourceName: sourceName)
    }

    /// How the YAML is read. Production uses the default; tests and the reader benchmark compare.
    struct Reader {
        /// Try ``FastManifestScanner`` before libyaml.
        var fastPath = true
        /// Build the entries while reading (``ManifestEntryStream``) rather than from a whole tree.
        var streaming = true
        /// Set when the bytes are the caller's only copy, which it can read again: the scanner may
        /// give back the pages it has read, this many bytes at a time
        /// (``FastManifestScanner/read(_:entries:releaseStep:)``).
        var releaseStep: Int?
        /// Told of each entry as it is read (streaming only).
        var observer: EntryObserver?
        /// Check paths that come sorted without the path table (``PathIndex``); false: the table
        /// from the first path on (the fuzzer compares the two).
        var sortedPaths = true
    }

    static func manifest(from bytes: inout [UInt8], sourceName: String, reader: Reader = Reader()) throws -> Manifest {
        // A Metalink file (RFC 5854) is a manifest too, told by its first bytes, never by its name
        // (docs/manifest.md, "Metalink"). A checksum list needs the sizes from the server first:
        // `PublishedList` in MirrorCore makes a YAML manifest of it before it gets here.
        if Metalink.looksLike(bytes) {
            return try Metalink.parse(bytes, sourceName: sourceName).manifest(sourceName: sourceName)
        }
        if ChecksumList.looksLike(bytes) {
            throw ManifestError(file: sourceName, line: 1, message: "this is a checksum list (SHA256SUMS), which mirror reads "
                + "only as the manifest a run is given (it asks the server for the sizes first), not here")
        }
        let parsed = try parseTree(&bytes, sourceName: sourceName, reader: reader)
        var rules = ManifestRules(tree: parsed.tree, file: sourceName)
        rules.paths = PathIndex(sortedPrelude: reader.sortedPaths)
        rules.streamed = parsed.entries?.output
        return try rules.manifest()
    }

    /// Gunzips (when the bytes start with 1f 8b) and parses; empties `bytes` when done, so that a
    /// caller owning the only copy frees it before the rules run.
    static func parseTree(_ bytes: inout [UInt8], sourceName: String, reader: Reader) throws -> YAMLTreeBuilder.Parsed {
        if Gzip.isCompressed(bytes) {
            do {
                bytes = try Gzip.decompress(bytes)
            } catch let failure as Gzip.Failure {
                throw ManifestError(file: sourceName, message: failure.message)
            }
        }
        // docs/manifest.md says UTF-8. libyaml switches to UTF-16 when the bytes start with its
        // byte-order mark (yaml_parser_determine_encoding); such a file is refused here instead.
        // Forcing YAML_UTF8_ENCODING would not do: libyaml then no longer skips a UTF-8 BOM.
        if bytes.starts(with: [0xFF, 0xFE]) || bytes.starts(with: [0xFE, 0xFF]) {
            throw ManifestError(file: sourceName, line: 1, column: 1,
                                message: "manifest is UTF-16 (it starts with a UTF-16 byte-order mark); manifests must be UTF-8")
        }
        let parsed: YAMLTreeBuilder.Parsed?
        do {
            parsed = try YAMLParser.parse(bytes, fastPath: reader.fastPath,
                                          entries: reader.streaming ? ManifestEntryStream(file: sourceName, inputSize: bytes.count,
                                                                                          observer: reader.observer,
                                                                                          sortedPaths: reader.sortedPaths) : nil,
                                          releaseStep: reader.releaseStep)
        } catch let e as YAMLError {
            throw ManifestError(file: sourceName, line: e.line, column: e.column, message: e.message)
        }
        bytes = []
        guard let tree = parsed else {
            throw ManifestError(file: sourceName, line: 1, column: 1, message: ManifestRules.emptyMessage)
        }
        return tree
    }
}
