#if canImport(Glibc)
import Glibc
#endif

/// Replaces the file `name` in the folder `folder` with `bytes`, atomically: a new temporary file
/// in the same folder, `fsync`, `renameat` over the name, then `fsync` of the folder so the new
/// name survives a crash. A reader (node_exporter, the next run) sees the old content or the new,
/// never a half-written file, and `name` keeps its old content until the rename.
///
/// The temporary name is `.NAME.tmp-` and 16 random hex digits (`SystemRandomNumberGenerator`,
/// `getrandom(2)`), opened with `openat(O_CREAT | O_EXCL | O_NOFOLLOW)`: someone who can write in
/// the folder cannot guess it, and whatever already has that name (a planted file, folder or
/// link) is never opened, followed or removed; another random name is drawn instead, at most
/// ``atomicReplaceAttempts`` times (a loop, never recursion). `mode` is set with `fchmod`, so the
/// umask cannot change it (0644 for what node_exporter must read, 0600 for what is private).
package func replaceFileAtomically(folder: FileDescriptor, name: String, bytes: [UInt8], mode: mode_t = 0o644) throws {
    let display = folder.displayPath + "/" + name
    var created: (fd: Int32, name: String)?
    var lastError: Int32 = EEXIST
    for _ in 0..<atomicReplaceAttempts {
        var generator = SystemRandomNumberGenerator()
        let suffix = String(UInt64.random(in: 0...UInt64.max, using: &generator), radix: 16)
        let candidate = ".\(name).tmp-" + String(repeating: "0", count: 16 - suffix.count) + suffix
        let fd = retryingOnEINTR { DiskChange.openat(folder.fd, candidate, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode) }
        if fd >= 0 {
            created = (fd, candidate)
            break
        }
        lastError = errno
        guard lastError == EEXIST else { break }
    }
    guard let (fd, temporary) = created else {
        throw SystemError("create a temporary file for", display, code: lastError)
    }
    let file = FileDescriptor(fd: fd, displayPath: folder.displayPath + "/" + temporary)
    do {
        if DiskChange.fchmod(fd, mode) != 0 { throw SystemError("chmod", file.displayPath) }
        try bytes.withUnsafeBytes { try file.write($0, at: 0) }
        try file.sync()
        file.close()
        if DiskChange.renameat(folder.fd, temporary, folder.fd, name) != 0 { throw SystemError("replace", display) }
    } catch {
        file.close()
        DiskChange.unlinkat(folder.fd, temporary, 0)
        throw error
    }
    try folder.sync()
}

/// How many random temporary names ``replaceFileAtomically(folder:name:bytes:mode:)`` tries
/// before it gives up: with 64 random bits, a second collision means the names are not random.
let atomicReplaceAttempts = 8

/// Opens the folder holding `path` (a user-given file path such as `--metrics-file`) and returns
/// it with the file's own name.
package func openParentFolder(of path: String) throws -> (FileDescriptor, String) {
    let slash = path.lastIndex(of: "/")
    let folder = slash.map { path[..<$0].isEmpty ? "/" : String(path[..<$0]) } ?? "."
    let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
    guard !name.isEmpty, name != ".", name != ".." else { throw SystemError("write", path, code: EISDIR) }
    let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { throw SystemError("open folder", folder) }
    return (FileDescriptor(fd: fd, displayPath: folder), name)
}
