import MirrorFS

/// The `files` list: each entry's keys, the `path` rules, and uniqueness across entries.
extension ManifestRules {
    static let entryKeys = EntryKey.allCases.map(\.rawValue)

    /// An entry's keys. Matched on the key's bytes packed into one integer (all are at most 7
    /// bytes), so no String is made for the 3–7 keys of every entry.
    enum EntryKey: String, CaseIterable {
        case path, url, size, sha256, sha512, mtime, mode, chunks

        init?(_ b: ArraySlice<UInt8>) {
            guard b.count <= 7 else { return nil }
            let packed = EntryKey.pack(b)
            guard let i = EntryKey.packedNames.firstIndex(of: packed) else { return nil }
            self = EntryKey.allCases[i]
        }

        private static let packedNames: [UInt64] = allCases.map { pack(Array($0.rawValue.utf8)[...]) }

        /// Up to 7 bytes as one integer; exact, since the length is in the top byte.
        static func pack(_ b: ArraySlice<UInt8>) -> UInt64 {
            var v = UInt64(b.count) << 56
            var shift: UInt64 = 0
            for byte in b { v |= UInt64(byte) << shift; shift += 8 }
            return v
        }
    }

    mutating func entries(_ files: YAMLTree.Ref) throws -> [ManifestEntry] {
        guard tree.kind(files) == .sequence else {
            let hint = tree.isNull(files) ? " (write \"files: []\" for none)" : ""
            throw error(files, "files must be a list of entries\(hint), got \(tree.describe(files))")
        }
        if let streamed, streamed.filesNode == files.id {
            return try streamed.result(baseURL: baseURL)
        }
        let count = tree.count(files)
        paths.reserve(count)
        var entries: [ManifestEntry] = []
        entries.reserveCapacity(count)
        for i in 0 ..< count {
            entries.append(try entry(tree.item(files, i), after: entries))
        }
        return entries
    }

    /// Entry `earlier.count`, read from `node`.
    mutating func entry(_ node: YAMLTree.Ref, after earlier: [ManifestEntry]) throws -> ManifestEntry {
        let (entry, relativeURL) = try entryIgnoringBase(node, after: earlier)
        if let relativeURL, baseURL == nil { throw missingBaseError(entry, at: relativeURL) }
        return entry
    }

    /// Where an entry with a relative url is refused when the manifest has no `base_url`.
    struct RelativeURL {
        var at: YAMLTree.Ref
        var hasURLKey: Bool
    }

    /// An entry, checked by every rule but one: a relative url needs `base_url`, which a streamed
    /// reader (``ManifestEntryStream``) knows only at the end. The second value says where that
    /// rule would apply. `earlier`: the entries before it, whose paths its path must not clash with.
    mutating func entryIgnoringBase(_ node: YAMLTree.Ref, after earlier: [ManifestEntry]) throws -> (ManifestEntry, RelativeURL?) {
        guard tree.kind(node) == .mapping else {
            throw error(node, "each entry of files must be a mapping with path, size and sha256, got \(tree.describe(node))")
        }
        var path: ManifestPath?
        var urlNode: YAMLTree.Ref?
        var location: ManifestEntry.Location?
        var size: Int64?
        var digests = DigestSet()
        var mtime: FileTime?
        var mode: UInt32?
        var chunks: ChunkIndexReference?
        var chunksNode: YAMLTree.Ref?
        for i in 0 ..< tree.count(node) {
            let key = tree.key(node, i)
            let value = tree.value(node, i)
            switch EntryKey(tree.bytes(key)) {
            case .path:
                let p = arena.path(try pathValue(value))
                if let problem = paths.insert(p, line: value.line, after: earlier) { throw error(value, problem) }
                path = p
            case .url:
                urlNode = value
                location = try entryURL(value)
            case .size:
                size = try entrySize(value)
            case .sha256:
                digests[.sha256] = try digest(value, key: "sha256", byteCount: DigestAlgorithm.sha256.byteCount)
            case .sha512:
                digests[.sha512] = try digest(value, key: "sha512", byteCount: DigestAlgorithm.sha512.byteCount)
            case .mtime:
                mtime = try timestamp(value)
            case .mode:
                mode = try modeValue(value)
            case .chunks:
                chunks = try chunkIndex(value)
                chunksNode = value
            case nil:
                let name = tree.string(key)
                throw error(key, "unknown key \(quoted(name)) in an entry; allowed keys: "
                            + ManifestRules.entryKeys.joined(separator: ", ") + suggestion(name, ManifestRules.entryKeys))
            }
        }
        guard let path else {
            throw error(node, "entry has no path; every entry needs path, size and sha256")
        }
        guard let size else {
            throw error(node, "entry \(quoted(path.string)) has no size; every entry needs path, size and sha256")
        }
        guard !digests.isEmpty else {
            throw error(node, "entry \(quoted(path.string)) has no sha256; every entry needs path, size and sha256 (64 hex digits) or sha512 (128)")
        }
        if let chunks, let chunksNode, chunks.size > ChunkIndex.largestText(forFileOf: size) {
            throw error(chunksNode, "chunks size \(chunks.size) is more than the index of a \(size)-byte file can be "
                        + "(at most \(ChunkIndex.largestText(forFileOf: size)) bytes)")
        }
        // Without `url`, the entry's url is its path, made when asked for (``ManifestEntry/url``).
        var relativeURL: RelativeURL?
        if location == nil { relativeURL = RelativeURL(at: node, hasURLKey: false) }
        if case .relative = location, let urlNode { relativeURL = RelativeURL(at: urlNode, hasURLKey: true) }
        return (ManifestEntry(pathBytes: path, url: location, size: size, digests: digests,
                              mtime: mtime, mode: mode, line: node.line, chunks: chunks), relativeURL)
    }

    /// An entry's `size`: at most ``ManifestEntry/largestSize``, and the manifest's sizes so far
    /// with it at most ``Manifest/largestTotal``, so that no sum of sizes or of their blocks in
    /// planning, the space check, `verify` or `status` can pass `Int64.max` (a hostile manifest
    /// with `size: 9223372036854775807` must be refused, not crash every run that reads it).
    mutating func entrySize(_ node: YAMLTree.Ref) throws -> Int64 {
        let size = try integer(node, "size must be a whole number of bytes ≥ 0")
        guard size <= ManifestEntry.largestSize else {
            throw error(node, "size must be at most \(ManifestEntry.largestSize) bytes (2^62, 4 EiB), got \(size)")
        }
        let (total, overflow) = sizeTotal.addingReportingOverflow(size)
        guard !overflow, total <= Manifest.largestTotal else {
            throw error(node, "the sizes of the files add up to more than \(Manifest.largestTotal) bytes (2^62, 4 EiB) with this one; "
                        + "a manifest lists at most that much")
        }
        sizeTotal = total
        return size
    }

    func missingBaseError(_ entry: ManifestEntry, at place: RelativeURL) -> ManifestError {
        let hint = place.hasURLKey ? "" : " (an entry without url is fetched from base_url + its path)"
        return error(place.at, "entry \(quoted(entry.path)) has a relative url but the manifest has no base_url\(hint)")
    }

    /// `chunks`: a mapping of `path` (a path under the published folder, by the same rules as an
    /// entry's), `size` and `sha256`, all three required (docs/manifest.md, "Chunk indexes").
    func chunkIndex(_ node: YAMLTree.Ref) throws -> ChunkIndexReference {
        guard tree.kind(node) == .mapping else {
            throw error(node, "chunks must be a mapping with path, size and sha256 of the file's chunk index, got \(tree.describe(node))")
        }
        let keys = ["path", "size", "sha256"]
        var path: String?
        var size: Int64?
        var sha256: Digest?
        for i in 0 ..< tree.count(node) {
            let key = tree.key(node, i)
            let value = tree.value(node, i)
            switch tree.string(key) {
            case "path": path = try pathValue(value)
            case "size": size = try integer(value, "size must be a whole number of bytes ≥ 0")
            case "sha256": sha256 = try digest(value, key: "sha256", byteCount: DigestAlgorithm.sha256.byteCount)
            case let name:
                throw error(key, "unknown key \(quoted(name)) in chunks; allowed keys: " + keys.joined(separator: ", ")
                            + suggestion(name, keys))
            }
        }
        guard let path, let size, let sha256 else {
            throw error(node, "chunks needs path, size and sha256 (of the chunk index file)")
        }
        return ChunkIndexReference(path: path, size: size, sha256: sha256)
    }

    /// `path`: a string that passes `ManifestRules.pathProblem`.
    func pathValue(_ node: YAMLTree.Ref) throws -> String {
        guard tree.kind(node) == .scalar, !tree.isNull(node) else {
            throw error(node, "path must be a string (a relative path), got \(tree.describe(node))")
        }
        let path = tree.string(node)
        if let problem = ManifestRules.pathProblem(tree.bytes(node)) {
            throw error(node, problem(quoted(path)))
        }
        return path
    }

    /// The spec's path rules, checked on the UTF-8 bytes. Returns a message builder taking the
    /// quoted path, or nil when the path is fine.
    static func pathProblem(_ bytes: ArraySlice<UInt8>) -> ((String) -> String)? {
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        guard !bytes.isEmpty else { return { _ in "path must not be empty" } }
        var previous: UInt8 = 0
        for byte in bytes {
            // C0 controls, DEL, and C1 controls (U+0080–U+009F are C2 80–C2 9F in UTF-8).
            if byte < 0x20 || byte == 0x7f || (previous == 0xc2 && (0x80...0x9f).contains(byte)) {
                let hex = String(byte, radix: 16, uppercase: true)  // for C1, the 2nd byte is the code
                let name = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
                return { "path \($0) contains the control character \(name); paths must not contain control characters" }
            }
            if byte == UInt8(ascii: "\\") {
                return { "path \($0) contains a backslash; separate folders with \"/\"" }
            }
            previous = byte
        }
        if bytes.first == slash {
            return { "path \($0) is absolute; paths are relative to the destination (remove the leading \"/\")" }
        }
        var start = bytes.startIndex
        while start <= bytes.endIndex {
            let end = bytes[start...].firstIndex(of: slash) ?? bytes.endIndex
            let component = bytes[start ..< end]
            if component.isEmpty {
                return { "path \($0) has an empty component; write no \"//\" and no trailing \"/\"" }
            }
            if component.count == 1 && component.first == dot {
                return { "path \($0) has a \".\" component; write the path without it" }
            }
            if component.count == 2 && component.first == dot && component.last == dot {
                return { "path \($0) has a \"..\" component; paths must stay inside the destination" }
            }
            start = end + 1
        }
        let first = bytes[bytes.startIndex ..< (bytes.firstIndex(of: slash) ?? bytes.endIndex)]
        if first.elementsEqual(".mirror".utf8) {
            return { "path \($0) is inside \".mirror\", the folder where mirror keeps its own state" }
        }
        if isStateFolderName(foldingCase: first) {
            let shown = String(decoding: first, as: UTF8.self)
            return { "path \($0) is inside \"\(shown)\", which is \".mirror\" (the folder where mirror keeps its own state) on a case-insensitive file system" }
        }
        return nil
    }

    /// True for `.mirror` in any ASCII case (`.MIRROR`, `.Mirror`): on a case-insensitive file
    /// system (macOS by default, a CIFS/SMB share, ext4 with `casefold`) such a name opens the state
    /// folder itself. Only ASCII letters are folded: the only non-ASCII characters that Unicode case
    /// folding (CaseFolding.txt, status C and S) maps onto an ASCII letter are U+212A KELVIN SIGN (k)
    /// and U+017F LONG S (s), and `.mirror` has neither letter.
    static func isStateFolderName<C: Collection>(foldingCase name: C) -> Bool where C.Element == UInt8 {
        let state = ".mirror".utf8
        guard name.count == state.count else { return false }
        return zip(name, state).allSatisfy { a, b in
            a == b || ((UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(a) && a | 0x20 == b)
        }
    }
}

