import MirrorFS

/// The publisher's side of chunk indexes (`mirror manifest create --chunks`; docs/manifest.md,
/// "Chunk indexes"): one pass over a large file gives its SHA-256 for the manifest and its chunks
/// for the index, and the index is written under `DIR/.mirror-chunks/`, so that whoever publishes
/// DIR publishes the indexes with it. `manifest create` never lists that folder.
public enum ChunkIndexWriter {
    /// The folder under DIR that holds the indexes: `.mirror-chunks/PATH` for the file PATH.
    public static let folderName = ".mirror-chunks"

    /// The index's path under DIR for the file `path`: the same path under ``folderName``, so the
    /// indexes form the files' own tree, which can hold no file that is also a folder.
    public static func indexPath(for path: String) -> String { folderName + "/" + path }

    /// Size, SHA-256 and chunks of one file, in one read: chunked as `format` can say
    /// (``Chunker/Parameters/forFile(ofSize:)`` for version 2, ``Chunker/Parameters/version1``
    /// for version 1), each chunk's digest kept to ``ChunkIndex/digestBytes(forChunks:)`` bytes in
    /// version 2, whole in version 1.
    static func hashAndIndex(_ path: String, in root: Destination, format: ChunkIndex.Format = .binary) throws -> ManifestWriter.Hashed {
        let file = try root.openForReading(path)
        defer { file.close() }
        let status = try file.stat()
        let size = status.size
        let whole = Hasher(.sha256)
        let chunker = Chunker(format == .text ? .version1 : .forFile(ofSize: size))
        var chunks: [ChunkIndex.Chunk] = []
        try chunker.chunks(of: file, size: size, wholeFile: whole) { chunks.append(ChunkIndex.Chunk(length: $0.length, digest: $0.digest)) }
        let digest = whole.finalize()
        let index = ChunkIndex(parameters: chunker.parameters, size: size, fileDigest: ChunkDigest(digest.bytes),
                               digestBytes: format == .text ? 32 : ChunkIndex.digestBytes(forChunks: chunks.count), chunks: chunks)
        return ManifestWriter.Hashed(size: size, digest: digest, index: index, status: status)
    }

    /// Writes `index` as `.mirror-chunks/PATH` under DIR, or as `PATH` in `chunksFolder`
    /// (`--chunks-dir`), atomically (a reader sees the old index or the new one), making the
    /// folders it needs without following a link, and returns what the manifest says of it: the
    /// path `.mirror-chunks/PATH` either way, where a client asks for it under `base_url`.
    static func write(_ index: ChunkIndex, for path: String, in root: Destination,
                      folder chunksFolder: Destination? = nil, format: ChunkIndex.Format = .binary) throws -> ChunkIndexReference {
        let relative = indexPath(for: path)
        let bytes = index.encoded(format)
        let (folder, name) = try chunksFolder.map { try $0.openParent(of: path, create: true) } ?? root.openParent(of: relative, create: true)
        defer { folder.close() }
        try replaceFileAtomically(folder: folder, name: name, bytes: bytes)
        return ChunkIndexReference(path: relative, size: Int64(bytes.count), sha256: Hasher.digest(.sha256, of: bytes))
    }
}
