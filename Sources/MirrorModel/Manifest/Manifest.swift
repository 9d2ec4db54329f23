import MirrorFS

/// A parsed, validated manifest (spec: `docs/manifest.md`).
///
/// Every value here has already passed the spec's rules: paths are safe relative paths, URLs use an
/// allowed scheme, checksums have the right length. Code downstream relies on that and does not
/// re-check.
public struct Manifest: Sendable {
    /// The name the user gave the manifest (a path or URL), used as the `FILE` in messages.
    public var sourceName: String
    public var version: Int
    /// Absolute URL ending in `/`, when present.
    public var baseURL: String?
    /// Absolute URLs ending in `/`, tried in order after `baseURL` for entries with a relative URL.
    public var mirrors: [String]
    /// The `destination` key, as written (relative paths are relative to the manifest's folder).
    public var destination: String?
    public var entries: [ManifestEntry]
    /// `serial`: a whole number the publisher raises with every publish (docs/manifest.md). With
    /// `--trust`, a DEST refuses a manifest whose serial is below the highest it accepted
    /// (docs/signing.md, "Versions"): what stops a mirror from serving an older signed manifest.
    public var serial: Int64?
    /// `expires`: after this time the manifest is refused with `--trust` (docs/signing.md): what
    /// stops a mirror from serving the same signed manifest for ever.
    public var expires: FileTime?
    /// The SHA-256 of the checksum list or Metalink file this manifest was made of, when its
    /// OpenPGP signature was checked (`--keyring`; docs/signing.md). `serial` is then the time
    /// that signature was made: a destination holds the next list to both, as it holds a signed
    /// YAML manifest to its serial and bytes, and its refusals name times, not numbers.
    public var signedListSHA256: String?

    /// The most a manifest's sizes may add up to (2^62 bytes, 4 EiB; docs/manifest.md): with each
    /// size at most ``ManifestEntry/largestSize`` too, no sum of them in planning, the space check,
    /// `verify` or `status` passes `Int64.max`.
    public static let largestTotal: Int64 = 1 << 62

    public init(sourceName: String, version: Int = 1, baseURL: String? = nil, mirrors: [String] = [],
                destination: String? = nil, entries: [ManifestEntry], serial: Int64? = nil, expires: FileTime? = nil) {
        self.sourceName = sourceName
        self.serial = serial
        self.expires = expires
        self.version = version
        self.baseURL = baseURL
        self.mirrors = mirrors
        self.destination = destination
        self.entries = entries
    }

    /// The URLs to try for `entry`, in order: an absolute `url` alone; otherwise the relative
    /// reference resolved against `base_url`, then against each mirror (RFC 3986 §5.2).
    public func sources(for entry: ManifestEntry) -> [String] {
        switch entry.url {
        case .absolute(let url):
            return [url]
        case .mirrored(let urls):
            return urls
        case .relative(let reference):
            let bases = (baseURL.map { [$0] } ?? []) + mirrors
            return bases.compactMap { URLReference.resolve(reference, against: $0) }
        }
    }

    /// The URLs of `entry`'s chunk index, in order: its path, percent-encoded, resolved against
    /// `base_url`, then against each mirror. None without a `base_url`.
    public func chunkIndexSources(for entry: ManifestEntry) -> [String] {
        guard let chunks = entry.chunks, let baseURL else { return [] }
        let reference = URLReference.encodePath(chunks.path)
        return ([baseURL] + mirrors).compactMap { URLReference.resolve(reference, against: $0) }
    }
}

/// One file the destination must hold.
public struct ManifestEntry: Sendable, Hashable {
    /// The largest `size` a manifest may give (2^62 bytes, 4 EiB): far above any file, and low
    /// enough that sizes, rounded up to blocks and added, stay inside `Int64` (docs/manifest.md).
    public static let largestSize: Int64 = 1 << 62
    /// Where an entry's bytes come from.
    public enum Location: Sendable, Hashable {
        /// An absolute URL: used as is; mirrors do not apply.
        case absolute(String)
        /// A reference relative to `base_url` (and each mirror). Already percent-encoded.
        case relative(String)
        /// Absolute URLs of the same bytes, tried in this order: a Metalink file's `<url>`s by
        /// priority (``Metalink``). Mirrors do not apply; a YAML manifest never makes one.
        case mirrored([String])
    }

    // The stored properties are in the order that packs them (Swift lays a struct out in
    // declaration order): 88 bytes an entry where the plain optionals took 128, 40 MB less for
    // 10^6 entries (docs/performance.md, "10^6 entries"). `path`, `url`, `chunks`, `mtime`,
    // `mode` and `line` are computed over the packed fields.

    /// Relative POSIX path under the destination (validated: no `..`, no empty component, ...),
    /// as bytes in the manifest's shared blocks (``ManifestPath``: no heap string per entry).
    public var pathBytes: ManifestPath
    public var size: Int64
    /// Digests of the whole file, by algorithm: at least one is present, and every one present
    /// is checked.
    public var digests: DigestSet
    /// A `url` of the entry's own, its chunk index and its piece hashes, which few entries have (``Rare``): one
    /// pointer, nil for the others.
    private var rare: Rare?
    private var mtimeSeconds: Int64
    /// -1 when the entry has no `mtime` (the manifest's nanoseconds are 0...999,999,999).
    private var mtimeNanoseconds: Int32
    private var storedLine: Int32
    /// ``noMode`` when the entry has no `mode` (the manifest's modes are 0...0o777).
    private var storedMode: UInt16

    private static let noMode = UInt16.max

    /// What few entries of a large manifest have, apart, so that the others pay one nil pointer
    /// for both (16 bytes an entry, 16 MB at 10^6 entries, at a run's peak). Never changed once
    /// made: a setter makes another.
    private final class Rare: Sendable {
        let url: Location?
        let chunks: ChunkIndexReference?
        let pieces: PieceHashes?

        private init(url: Location?, chunks: ChunkIndexReference?, pieces: PieceHashes?) {
            self.url = url
            self.chunks = chunks
            self.pieces = pieces
        }

        /// nil when the entry has none of them.
        static func make(url: Location?, chunks: ChunkIndexReference?, pieces: PieceHashes?) -> Rare? {
            url == nil && chunks == nil && pieces == nil ? nil : Rare(url: url, chunks: chunks, pieces: pieces)
        }
    }

    /// The entry's `url`; nil when it has none, and its url is its path, percent-encoded
    /// (docs/manifest.md): made when asked for, so that such an entry holds no string of its own.
    public var explicitURL: Location? { rare?.url }

    /// The file's chunk index, when the publisher wrote one (`chunks:`; docs/manifest.md, "Chunk
    /// indexes"): lets a client that holds an older version fetch only the chunks it lacks.
    public var chunks: ChunkIndexReference? {
        get { rare?.chunks }
        set { rare = Rare.make(url: rare?.url, chunks: newValue, pieces: rare?.pieces) }
    }

    /// A Metalink file's piece hashes for the entry (``PieceHashes``): they point at a mirror that
    /// sends wrong bytes while the file arrives. A YAML manifest never gives them.
    public var pieces: PieceHashes? {
        get { rare?.pieces }
        set { rare = Rare.make(url: rare?.url, chunks: rare?.chunks, pieces: newValue) }
    }

    /// The path as text (an allocation for a path over 15 bytes; hot paths use ``pathBytes``).
    public var path: String {
        get { pathBytes.string }
        set { pathBytes = ManifestPath(newValue) }
    }

    /// Where the bytes come from: the `url` written, else the path percent-encoded, relative to
    /// `base_url` and the mirrors.
    public var url: Location {
        get { explicitURL ?? .relative(URLReference.encodePath(path)) }
        set { rare = Rare.make(url: newValue, chunks: rare?.chunks, pieces: rare?.pieces) }
    }

    /// Modification time to set on the verified file.
    public var mtime: FileTime? {
        get { mtimeNanoseconds < 0 ? nil : FileTime(seconds: mtimeSeconds, nanoseconds: Int64(mtimeNanoseconds)) }
        set {
            mtimeSeconds = newValue?.seconds ?? 0
            mtimeNanoseconds = newValue.map { Int32(clamping: min(max(0, $0.nanoseconds), 999_999_999)) } ?? -1
        }
    }

    /// Permission bits (0...0o777) to set on the verified file.
    public var mode: UInt32? {
        get { storedMode == ManifestEntry.noMode ? nil : UInt32(storedMode) }
        set { storedMode = newValue.map { UInt16(clamping: min($0, 0o7777)) } ?? ManifestEntry.noMode }
    }

    /// Line of the entry in the manifest (1-based), for messages.
    public var line: Int {
        get { Int(storedLine) }
        set { storedLine = Int32(clamping: newValue) }
    }

    public init(path: String, url: Location, size: Int64, digests: DigestSet,
                mtime: FileTime? = nil, mode: UInt32? = nil, line: Int = 0, chunks: ChunkIndexReference? = nil) {
        self.init(pathBytes: ManifestPath(path), url: url, size: size, digests: digests, mtime: mtime, mode: mode,
                  line: line, chunks: chunks)
    }

    /// `url` nil: the entry has none, and its path stands for it (``url``).
    init(pathBytes: ManifestPath, url: Location?, size: Int64, digests: DigestSet,
         mtime: FileTime? = nil, mode: UInt32? = nil, line: Int = 0, chunks: ChunkIndexReference? = nil) {
        self.pathBytes = pathBytes
        self.size = size
        self.digests = digests
        self.rare = Rare.make(url: url, chunks: chunks, pieces: nil)
        self.mtimeSeconds = 0
        self.mtimeNanoseconds = -1
        self.storedLine = 0
        self.storedMode = ManifestEntry.noMode
        self.mtime = mtime
        self.mode = mode
        self.line = line
    }

    /// Equal when every field is, the url as it resolves (written or made from the path).
    public static func == (a: ManifestEntry, b: ManifestEntry) -> Bool {
        a.pathBytes == b.pathBytes && a.size == b.size && a.digests == b.digests && a.chunks == b.chunks && a.pieces == b.pieces
            && a.mtime == b.mtime && a.mode == b.mode && a.line == b.line && a.url == b.url
    }

    public func hash(into hasher: inout Swift.Hasher) {
        hasher.combine(pathBytes)
        hasher.combine(size)
        hasher.combine(digests)
    }
}

/// Where an entry's chunk index is published and what it must be: its path under the published
/// folder (fetched from `base_url` + that path, then each mirror's), its size and its SHA-256, so
/// a signed manifest vouches for the index as for the files. A class, so that the many entries
/// without one pay a nil pointer, not the whole value.
public final class ChunkIndexReference: Sendable, Hashable {
    public let path: String
    public let size: Int64
    public let sha256: Digest

    public init(path: String, size: Int64, sha256: Digest) {
        self.path = path
        self.size = size
        self.sha256 = sha256
    }

    public static func == (a: ChunkIndexReference, b: ChunkIndexReference) -> Bool {
        a.path.utf8.elementsEqual(b.path.utf8) && a.size == b.size && a.sha256 == b.sha256
    }

    public func hash(into hasher: inout Swift.Hasher) {
        hasher.combine(size)
        hasher.combine(sha256)
    }
}
