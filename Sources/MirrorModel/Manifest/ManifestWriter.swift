import MirrorFS
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// Why `mirror manifest create` could not write a manifest.
public struct ManifestWriterError: Error, CustomStringConvertible {
    public var description: String
    /// Whether the command line itself is wrong (`--base-url`, `-o`): exit 64, not 1.
    public var isUsage: Bool
    init(_ description: String, isUsage: Bool = false) {
        self.description = description
        self.isUsage = isUsage
    }
}

/// `mirror manifest create`: a v1 manifest (`docs/manifest.md`) of a folder's regular files.
///
/// Deterministic, so that publishing the same tree twice gives the same bytes (and an unchanged
/// manifest lets every client's conditional fetch answer 304): paths sorted by their UTF-8 bytes,
/// one fixed layout, no time of writing, only `path`, `size` and `sha256` per entry, and `mtime`
/// and `mode` when asked (``Options``), which an unchanged tree keeps too (the default `url`,
/// the path percent-encoded under `base_url`, is what a web server serving the folder expects).
///
/// The walk never follows a symbolic link (`openat` with `O_NOFOLLOW | O_DIRECTORY`, `fstatat`
/// with `AT_SYMLINK_NOFOLLOW`): a link is skipped and named, as is anything else that is not a
/// regular file or whose name a manifest cannot hold (not UTF-8, a control character, a backslash).
/// A top-level `.mirror` is skipped: it is `mirror`'s own state when DIR is itself a destination.
/// Files are hashed on every core (``WorkerPool``), each opened through
/// ``Destination/openForReading(_:)`` so a folder swapped for a link mid-walk is refused too.
public enum ManifestWriter {
    /// A regular file found by the walk.
    public struct FoundFile: Sendable {
        public var path: String
        public var size: Int64
        public var sha256: Digest?
        /// Its chunk index, for a file of at least `--chunks-above` bytes with `--chunks`.
        public var chunks: ChunkIndexReference?
        /// `--mtime`: its modification time, RFC 3339 in UTC.
        public var mtime: String?
        /// `--mode`: its permission bits, `0644`.
        public var mode: String?
    }

    /// Something the walk left out, and why (for a note on standard error).
    public struct Skipped: Sendable, Equatable {
        /// For people: ``Formatting/printable(bytes:)`` of the name's bytes (controls and invalid
        /// UTF-8 escaped), since such names are among the reasons to skip.
        public var path: String
        public var reason: String

        public init(path: String, reason: String) {
            self.path = path
            self.reason = reason
        }
    }

    public struct Result: Sendable {
        /// Sorted by the UTF-8 bytes of their paths, hashed.
        public var files: [FoundFile]
        public var skipped: [Skipped]
        /// Files listed with less than asked (a mode without its setuid bit), and why.
        public var notes: [Skipped]
        /// The chunk indexes written.
        public var chunkIndexes: Int { files.count(where: { $0.chunks != nil }) }
        /// The bytes of the listed files.
        public var bytes: Int64 { files.clampedSum(\.size) }
        /// The manifest text.
        public var yaml: String
    }

    /// Walks `directory`, hashes its files and renders the manifest.
    ///
    /// - Parameters:
    ///   - baseURL: the `base_url`; a missing final `/` is added (a base is a folder).
    ///   - excluding: what not to list (``ManifestExclusions``): the `-o` output and its
    ///     signature, and `--exclude` patterns.
    ///   - options: `mtime` and `mode`, and chunk indexes (``Options/chunksAbove``): files of at
    ///     least that many bytes get one, written under `DIR/.mirror-chunks/` or in
    ///     ``Options/chunksFolder`` and named in their entry (``ChunkIndexWriter``).
    public static func create(directory: String, baseURL: String, excluding: ManifestExclusions = ManifestExclusions(),
                              threads: Int = WorkerPool.coreCount, options: Options = Options()) throws -> Result {
        let chunksAbove = options.chunksAbove
        let base = baseURL.hasSuffix("/") ? baseURL : baseURL + "/"
        try checkBaseURL(base)
        guard let root = try Destination.openFolder(directory, role: "the folder to describe") else {
            throw ManifestWriterError("\(directory): no such folder")
        }
        // The --chunks-dir folder, made before the walk so that one under DIR is never listed.
        let chunksFolder = try chunksAbove == nil ? nil : options.chunksFolder.map(openChunksFolder)
        var excluding = excluding
        if let status = try chunksFolder?.root.stat() { excluding.files.append((status.device, status.inode)) }
        var found: [(bytes: [UInt8], file: FoundFile)] = []
        var skipped: [Skipped] = []
        try walk(root.root, relative: [], display: directory, excluding: excluding, found: &found, skipped: &skipped)
        found.sort { $0.bytes.lexicographicallyPrecedes($1.bytes) }
        skipped.sort { Array($0.path.utf8).lexicographicallyPrecedes(Array($1.path.utf8)) }
        var files = found.map(\.file)
        var notes: [Skipped] = []

        let results = Locked([Swift.Result<Hashed, Error>?](repeating: nil, count: files.count))
        let snapshot = files
        WorkerPool.run(count: snapshot.count, threads: threads) { index in
            let file = snapshot[index]
            let result = Swift.Result<Hashed, Error> {
                if let above = chunksAbove, file.size >= above { return try ChunkIndexWriter.hashAndIndex(file.path, in: root, format: options.chunksFormat) }
                return try hash(file.path, in: root)
            }
            results.withLock { $0[index] = result }
        }
        // Every worker has returned: the lock is only taken once more, to take the results whole.
        let hashed = results.withLock { $0 }
        for index in files.indices {
            switch hashed[index] {
            case .success(let hashed):
                files[index].size = hashed.size
                files[index].sha256 = hashed.digest
                attributes(of: &files[index], status: hashed.status, options: options, notes: &notes)
                if let chunkIndex = hashed.index {
                    files[index].chunks = try ChunkIndexWriter.write(chunkIndex, for: files[index].path, in: root, folder: chunksFolder,
                                                                   format: options.chunksFormat)
                }
            case .failure(let error):
                throw ManifestWriterError("\(error)")
            case nil:
                throw ManifestWriterError("\(root.display(files[index].path)): not hashed")
            }
        }
        return Result(files: files, skipped: skipped, notes: notes, yaml: render(baseURL: base, files: files, serial: options.serial, expires: options.expires))
    }

    /// The manifest text for `files` (already sorted and hashed).
    public static func render(baseURL: String, files: [FoundFile], serial: Int64? = nil, expires: FileTime? = nil) -> String {
        var out = "version: 1\n"
        if let serial { out += "serial: \(serial)\n" }
        if let expires, let text = RFC3339.format(FileTime(seconds: expires.seconds)) { out += "expires: \(quoted(text))\n" }
        out += "base_url: \(quoted(baseURL))\n"
        if files.isEmpty { return out + "files: []\n" }
        out += "files:\n"
        for file in files {
            out += "  - path: \(quoted(file.path))\n"
            out += "    size: \(file.size)\n"
            out += "    sha256: \(file.sha256?.hex ?? "")\n"
            if let mtime = file.mtime { out += "    mtime: \(mtime)\n" }
            if let mode = file.mode { out += "    mode: \"\(mode)\"\n" }
            if let chunks = file.chunks {
                out += "    chunks:\n"
                out += "      path: \(quoted(chunks.path))\n"
                out += "      size: \(chunks.size)\n"
                out += "      sha256: \(chunks.sha256.hex)\n"
            }
        }
        return out
    }

    /// `text` as a YAML double-quoted scalar (YAML 1.1 §4.6.8): `\` and `"` escaped, and the
    /// characters YAML does not allow unescaped (C0, DEL, C1, U+2028, U+2029, BOM) as `\xHH`/`\uHHHH`.
    /// Quoting every path means no name (`- a`, `#x`, `yes`, `1e3`) is ever read back as something else.
    package static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            default:
                let v = scalar.value
                if v < 0x20 || v == 0x7f {
                    out += "\\x" + hex(v, digits: 2)
                } else if (0x80...0x9f).contains(v) || v == 0x2028 || v == 0x2029 || v == 0xfeff {
                    out += "\\u" + hex(v, digits: 4)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    private static func hex(_ v: UInt32, digits: Int) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }

    /// The base URL must be one the loader accepts: checked by loading a manifest that holds only it,
    /// so this and `mirror sync` can never disagree.
    static func checkBaseURL(_ base: String) throws {
        do {
            _ = try ManifestLoader.parse(Array("version: 1\nbase_url: \(quoted(base))\nfiles: []\n".utf8), sourceName: "--base-url")
        } catch let error as ManifestError {
            throw ManifestWriterError("--base-url \(redactedURL(base)): \(error.message)", isUsage: true)
        }
    }

    /// Writes `text` to `path` atomically (``replaceFileAtomically(folder:name:bytes:mode:)``: a
    /// temporary file beside it, `fsync`, `rename(2)`, `fsync` of the folder), so a reader (a web
    /// server publishing it) sees the old manifest or the new one, never half of one.
    public static func writeAtomically(_ text: String, to path: String) throws {
        if path.hasSuffix("/") { throw ManifestWriterError("-o \(path): a file name is needed, not a folder", isUsage: true) }
        let (folder, name) = try openParentFolder(of: path)
        defer { folder.close() }
        try replaceFileAtomically(folder: folder, name: name, bytes: Array(text.utf8))
    }

    // MARK: - Walking

    /// Lists `folder` (open descriptor) recursively in `found`, relative paths as bytes.
    private static func walk(_ folder: FileDescriptor, relative: [UInt8], display: String,
                             excluding: ManifestExclusions,
                             found: inout [(bytes: [UInt8], file: FoundFile)], skipped: inout [Skipped]) throws {
        for name in try folder.entryNames() {
            let path = relative.isEmpty ? name : relative + [UInt8(ascii: "/")] + name
            // `shown` is the manifest's path (only names that pass `unusableName` are listed); a
            // name that is skipped or fails is reported escaped, invalid UTF-8 bytes included.
            let shown = String(decoding: path, as: UTF8.self)
            if excluding.excludes(path: path, name: name) { continue }
            var escaped: String { Formatting.printable(bytes: path) }
            var st = stat()
            let cName = name.map { CChar(bitPattern: $0) } + [0]
            if fstatat(folder.fd, cName, &st, AT_SYMLINK_NOFOLLOW) != 0 {
                if errno == ENOENT { continue }  // removed while we walk
                throw SystemError("inspect", display + "/" + escaped)
            }
            let status = FileStatus(st)
            if relative.isEmpty && name == Array(Destination.stateFolderName.utf8) {
                if !status.isDirectory { skipped.append(Skipped(path: escaped, reason: "the name `.mirror` is reserved for mirror's state")) }
                continue
            }
            if status.isDirectory && excluding.excludes(status) {
                continue  // the --chunks-dir folder, when it lies under DIR
            }
            if relative.isEmpty && name == Array(ChunkIndexWriter.folderName.utf8) {
                continue  // the chunk indexes an earlier `--chunks` wrote: never listed
            }
            if relative.isEmpty && ManifestRules.isStateFolderName(foldingCase: name) {
                // `sync` refuses it (ManifestRules.pathProblem): listed, it would make the manifest unusable.
                skipped.append(Skipped(path: escaped, reason: "the name would be `.mirror`, mirror's state, on a case-insensitive file system"))
                continue
            }
            if let problem = unusableName(path) {
                skipped.append(Skipped(path: escaped, reason: problem))
                continue
            }
            if status.isSymlink {
                skipped.append(Skipped(path: escaped, reason: "a symbolic link (not followed)"))
            } else if status.isDirectory {
                let fd = openat(folder.fd, cName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                if fd < 0 { throw SystemError("open folder", display + "/" + escaped) }
                let child = FileDescriptor(fd: fd, displayPath: display + "/" + shown)
                try walk(child, relative: path, display: display, excluding: excluding, found: &found, skipped: &skipped)
            } else if status.isRegularFile {
                if excluding.excludes(status) { continue }
                found.append((path, FoundFile(path: shown, size: status.size, sha256: nil)))
            } else {
                skipped.append(Skipped(path: escaped, reason: "not a regular file"))
            }
        }
    }

    /// Why a manifest cannot hold this path (docs/manifest.md: UTF-8, no control character, no
    /// backslash), or nil.
    static func unusableName(_ path: [UInt8]) -> String? {
        guard let text = String(validating: path, as: UTF8.self) else { return "the name is not valid UTF-8" }
        for scalar in text.unicodeScalars {
            let v = scalar.value
            if v < 0x20 || v == 0x7f || (0x80...0x9f).contains(v) { return "the name holds a control character" }
            if scalar == "\\" { return "the name holds a backslash" }
            // libyaml refuses these two noncharacters anywhere in a document, even escaped.
            if v == 0xfffe || v == 0xffff { return "the name holds U+\(String(v, radix: 16, uppercase: true)), which YAML cannot carry" }
        }
        return nil
    }

    // MARK: - Hashing

    /// What hashing one file found: its size and SHA-256, its chunks when it was indexed, and the
    /// status of the file it read (for `mtime` and `mode`).
    struct Hashed {
        var size: Int64
        var digest: Digest
        var index: ChunkIndex?
        var status: FileStatus
    }

    /// Size and SHA-256 of one file, read to its end in 1 MiB blocks.
    private static func hash(_ path: String, in root: Destination) throws -> Hashed {
        // openForReading refuses anything but a regular file (one swapped in since the listing too).
        let file = try root.openForReading(path)
        defer { file.close() }
        let status = try file.stat()
        let hasher = Hasher(.sha256)
        let bytes = try FileHashing.read(file, into: [hasher])
        return Hashed(size: bytes, digest: hasher.finalize(), status: status)
    }
}
