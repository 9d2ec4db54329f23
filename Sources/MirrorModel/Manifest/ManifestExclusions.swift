import MirrorFS
#if canImport(Glibc)
import Glibc
#endif

/// What `mirror manifest create` leaves out besides `.mirror`:
///
/// - its own output and that output's signature (`-o FILE` and `FILE.sig`), by device and inode,
///   wherever they lie: republishing in place (`create -o DIR/manifest.yaml`, `manifest sign`, and
///   both again) must not list the old manifest or its signature, which re-signing then changes,
///   so every client's sync would fail on a checksum mismatch;
/// - files and folders matching an `--exclude` pattern (`fnmatch(3)`): a pattern without `/`
///   matches a name at any depth (`.DS_Store`, `*.tmp`, `.*`); one with `/` matches the whole
///   path relative to DIR (`FNM_PATHNAME`: `*` does not cross a `/`). An excluded folder is not
///   entered.
public struct ManifestExclusions: Sendable {
    public var files: [(device: UInt64, inode: UInt64)]
    public var patterns: [String]

    public init(files: [(device: UInt64, inode: UInt64)] = [], patterns: [String] = []) {
        self.files = files
        self.patterns = patterns
    }

    /// Whether the name `name` at `path` (bytes, relative to DIR) matches a pattern.
    func excludes(path: [UInt8], name: [UInt8]) -> Bool {
        guard !patterns.isEmpty else { return false }
        let cPath = path.map { CChar(bitPattern: $0) } + [0]
        let cName = name.map { CChar(bitPattern: $0) } + [0]
        for pattern in patterns {
            let matched = pattern.utf8.contains(UInt8(ascii: "/")) ? fnmatch(pattern, cPath, FNM_PATHNAME) == 0 : fnmatch(pattern, cName, 0) == 0
            if matched { return true }
        }
        return false
    }

    func excludes(_ status: FileStatus) -> Bool {
        files.contains { $0.device == status.device && $0.inode == status.inode }
    }
}
