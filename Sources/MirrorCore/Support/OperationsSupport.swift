#if canImport(Glibc)
import Glibc
#endif

extension Formatting {
    /// Parses a `--limit-rate` value in bytes per second: `500K`, `20M`, `1G`, `1.5m`, or plain
    /// bytes (`65536`). K, M and G are powers of 1024, as in curl's own `--limit-rate`; an optional
    /// trailing `B`, `/s` or `iB` is accepted. nil for anything else, zero or negative.
    public static func parseRate(_ text: String) -> Int64? {
        var t = text.trimmingSpaces.lowercased()
        if t.hasSuffix("/s") { t.removeLast(2) }
        if t.hasSuffix("ib") { t.removeLast(2) } else if t.hasSuffix("b") { t.removeLast() }
        var multiplier = 1.0
        switch t.last {
        case "k": multiplier = 1024
        case "m": multiplier = 1024 * 1024
        case "g": multiplier = 1024 * 1024 * 1024
        default: break
        }
        if multiplier != 1 { t.removeLast() }
        guard let value = Double(t), value.isFinite, value > 0 else { return nil }
        let bytes = (value * multiplier).rounded()
        guard bytes >= 1, bytes < 1e15 else { return nil }
        return Int64(bytes)
    }

    /// `2026-11-22T03:04:05Z` (RFC 3339, UTC, whole seconds): ``utcTimestamp(_:)`` of the second.
    public static func rfc3339(_ unixTime: Double) -> String {
        utcTimestamp(Int64(unixTime.rounded(.down)))
    }
}

/// Replaces the file `name` in the folder `folder` with `bytes`, atomically: a temporary file in
/// the same folder (`openat` with `O_EXCL | O_NOFOLLOW`), `fsync`, `renameat` over the name, then
/// `fsync` of the folder so the new name survives a crash. A reader (node_exporter, the next run)
/// sees the old content or the new, never a half-written file.
func replaceFileAtomically(folder: FileDescriptor, name: String, bytes: [UInt8], mode: mode_t = 0o644) throws {
    let display = folder.displayPath + "/" + name
    let temporary = ".\(name).tmp-\(getpid())"
    let fd = openat(folder.fd, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
    if fd < 0 && errno == EEXIST {
        // Left by a process with the same pid that died; it is ours to replace.
        unlinkat(folder.fd, temporary, 0)
        return try replaceFileAtomically(folder: folder, name: name, bytes: bytes, mode: mode)
    }
    guard fd >= 0 else { throw SystemError("create", folder.displayPath + "/" + temporary) }
    let file = FileDescriptor(fd: fd, displayPath: folder.displayPath + "/" + temporary)
    do {
        _ = fchmod(fd, mode)  // the umask must not narrow what node_exporter may read
        try bytes.withUnsafeBytes { try file.write($0, at: 0) }
        try file.sync()
        file.close()
        if renameat(folder.fd, temporary, folder.fd, name) != 0 { throw SystemError("replace", display) }
    } catch {
        file.close()
        unlinkat(folder.fd, temporary, 0)
        throw error
    }
    try folder.sync()
}

/// Opens the folder holding `path` (a user-given file path such as `--metrics-file`) and returns
/// it with the file's own name.
func openParentFolder(of path: String) throws -> (FileDescriptor, String) {
    let slash = path.lastIndex(of: "/")
    let folder = slash.map { path[..<$0].isEmpty ? "/" : String(path[..<$0]) } ?? "."
    let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
    guard !name.isEmpty, name != ".", name != ".." else { throw SystemError("write", path, code: EISDIR) }
    let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { throw SystemError("open folder", folder) }
    return (FileDescriptor(fd: fd, displayPath: folder), name)
}
