/// The version-1 rules over a parsed `YAMLTree`: top-level keys here, entries in
/// `ManifestRules+Entries.swift`, scalar formats in `ManifestRules+Values.swift`.
struct ManifestRules {
    static let emptyMessage = "manifest is empty: expected a mapping with version and files"
    static let topKeys = ["version", "serial", "expires", "base_url", "mirrors", "destination", "files"]
    static let supportedVersion = 1

    /// `var` only for ``ManifestEntryStream``, which shows the rules one item at a time.
    var tree: YAMLTree
    let file: String
    var baseURL: String?
    var paths = PathIndex()
    /// The sizes of the entries read so far, never more than ``Manifest/largestTotal``.
    var sizeTotal: Int64 = 0
    /// Where the entries' digests and paths are made, side by side (``ByteArena``).
    let arena = ByteArena()
    /// The `files` entries when the reader streamed them (``ManifestEntryStream``).
    var streamed: StreamedEntries?

    init(tree: YAMLTree, file: String) {
        self.tree = tree
        self.file = file
    }

    func error(_ at: YAMLTree.Ref, _ message: String) -> ManifestError {
        ManifestError(file: file, line: at.line, column: at.column, message: message)
    }

    mutating func manifest() throws -> Manifest {
        let root = tree.ref(tree.root)
        guard tree.kind(root) == .mapping else {
            if tree.isNull(root) { throw error(root, ManifestRules.emptyMessage) }
            throw error(root, "a manifest must be a mapping with version and files, got \(tree.describe(root))")
        }
        var values: [String: YAMLTree.Ref] = [:]
        var firstUnknown: YAMLTree.Ref?
        for i in 0 ..< tree.count(root) {
            let key = tree.key(root, i)
            let name = tree.string(key)
            if ManifestRules.topKeys.contains(name) {
                values[name] = tree.value(root, i)
            } else if firstUnknown == nil {
                firstUnknown = key
            }
        }
        // The version comes first: a newer manifest's new keys must be reported as "unsupported
        // version", not as unknown keys.
        if let node = values["version"] {
            let version = try integer(node, "version must be a whole number (this mirror reads version \(ManifestRules.supportedVersion))")
            guard version == Int64(ManifestRules.supportedVersion) else {
                throw error(node, "unsupported manifest version \(version): this mirror reads version \(ManifestRules.supportedVersion)")
            }
        }
        if let key = firstUnknown {
            let name = tree.string(key)
            throw error(key, "unknown key \(quoted(name)); allowed keys: "
                        + ManifestRules.topKeys.joined(separator: ", ") + suggestion(name, ManifestRules.topKeys))
        }
        guard values["version"] != nil else {
            throw error(root, "missing key \"version\": a manifest starts with \"version: \(ManifestRules.supportedVersion)\"")
        }
        guard let filesNode = values["files"] else {
            throw error(root, "missing key \"files\": the list of entries (write \"files: []\" for none)")
        }

        if let node = values["base_url"] {
            baseURL = try baseURLValue(node, key: "base_url")
        }
        var mirrors: [String] = []
        if let node = values["mirrors"] {
            guard tree.kind(node) == .sequence else {
                throw error(node, "mirrors must be a list of base URLs, got \(tree.describe(node))")
            }
            for i in 0 ..< tree.count(node) {
                mirrors.append(try baseURLValue(tree.item(node, i), key: "mirror"))
            }
        }
        var destination: String?
        if let node = values["destination"] {
            let value = try string(node, "destination must be a non-empty string")
            guard !value.isEmpty else { throw error(node, "destination must not be empty (omit it to use --dest)") }
            guard !value.utf8.contains(0) else { throw error(node, "destination contains a NUL character") }
            destination = value
        }
        let serial = try values["serial"].map { try integer($0, "serial must be a whole number ≥ 0, raised with every publish") }
        let expires = try values["expires"].map { try timestamp($0, key: "expires") }
        let entries = try self.entries(filesNode)
        return Manifest(sourceName: file, version: ManifestRules.supportedVersion, baseURL: baseURL,
                        mirrors: mirrors, destination: destination, entries: entries, serial: serial, expires: expires)
    }
}
