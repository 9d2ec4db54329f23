import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// Opening something beneath a folder descriptor without ever following a symlink.
///
/// Why: DEST may be writable by others (a shared lab folder) and its contents are not trusted. A
/// symlink planted at any component of a path, or at the file itself, must make the open fail
/// rather than lead a write, truncation or chmod outside DEST (docs/cli.md, "State on disk").
///
/// Where the kernel has it, `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` resolves the
/// whole path in one atomic lookup that cannot leave the folder nor cross a symlink. Older kernels
/// (before 5.6, `ENOSYS`) and seccomp filters that refuse it (`EPERM`) get the same guarantee by a
/// walk: one `openat(O_DIRECTORY | O_NOFOLLOW)` per folder, each relative to the previous descriptor,
/// then `openat(O_NOFOLLOW)` for the last component. Both refuse `..`, `.`, empty components and
/// absolute paths (`EXDEV`), and report a symlink as `ELOOP` (or `ENOTDIR` for a symlink in the
/// middle of the walk on some filesystems).
public enum SafePath {
    /// How paths are resolved; tests use ``walk`` to exercise the fallback on a kernel that has openat2.
    public enum Resolver: Sendable {
        case automatic
        case walk
    }

    /// `.walk` when the environment has `MIRROR_RESOLVE_WALK` set: a test switch (like
    /// `MIRROR_CRASH_AT`) so the integration tests prove the fallback too on a kernel with openat2.
    public static let defaultResolver: Resolver = getenv("MIRROR_RESOLVE_WALK") != nil ? .walk : .automatic

    /// `openat2` (or the walk) of `relative` beneath `folder`. Returns the new descriptor, or -1
    /// with `errno` set. `flags` always gains `O_NOFOLLOW | O_CLOEXEC`.
    public static func open(_ relative: String, beneath folder: Int32, flags: Int32, mode: mode_t = 0,
                            resolver: Resolver = SafePath.defaultResolver) -> Int32 {
        let flags = flags | O_NOFOLLOW | O_CLOEXEC
        guard isPlainRelative(relative) else {
            errno = EXDEV
            return -1
        }
        if resolver == .automatic, let fd = relative.withCString({ openat2Beneath(folder, $0, flags: flags, mode: mode) }) {
            return fd
        }
        guard let components = components(of: relative) else {
            errno = EXDEV
            return -1
        }
        return walk(components, beneath: folder, flags: flags, mode: mode)
    }

    /// Whether ``components(of:)`` would accept `relative`, checked on its bytes without splitting
    /// it: this runs once per manifest entry on the no-op path (100,000 times for a large manifest).
    static func isPlainRelative(_ relative: String) -> Bool {
        isPlainRelative(bytes: relative.utf8)
    }

    /// ``isPlainRelative(_:)`` of a path as bytes (a name `readdir` gave need not be UTF-8).
    @inline(__always)
    static func isPlainRelative<Bytes: Sequence<UInt8>>(bytes relative: Bytes) -> Bool {
        var length = 0
        var allDots = true
        var count = 0
        for b in relative {
            count += 1
            if b == 0 { return false }
            if b == UInt8(ascii: "/") {
                // An empty, "." or ".." component ends here (a leading "/" is an empty one).
                if length == 0 || (allDots && length <= 2) { return false }
                length = 0
                allDots = true
                continue
            }
            length += 1
            if b != UInt8(ascii: ".") { allDots = false }
        }
        return count > 0 && length > 0 && !(allDots && length <= 2)
    }

    /// ``open(_:beneath:flags:mode:resolver:)`` of a path given as bytes, names joined by `/`, as a
    /// walk of a folder met them (`SeedFolders`): a name that is not UTF-8 is opened as it is,
    /// never as the text it would decode to.
    package static func open(bytes relative: [UInt8], beneath folder: Int32, flags: Int32,
                     resolver: Resolver = SafePath.defaultResolver) -> Int32 {
        let flags = flags | O_NOFOLLOW | O_CLOEXEC
        guard isPlainRelative(bytes: relative) else {
            errno = EXDEV
            return -1
        }
        if resolver == .automatic, let fd = relative.withCString({ openat2Beneath(folder, $0, flags: flags, mode: 0) }) {
            return fd
        }
        let components = relative.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map(Array.init)
        return walk(components, beneath: folder, flags: flags, mode: 0)
    }

    /// `openat2` beneath `folder`, retried on `EINTR` and (a few times) on `EAGAIN`, which a
    /// concurrent rename causes (the kernel refuses to guess). nil when the kernel or a seccomp
    /// filter refuses the call itself (`ENOSYS`, `EPERM`): the caller then walks.
    private static func openat2Beneath(_ folder: Int32, _ path: UnsafePointer<CChar>, flags: Int32, mode: mode_t) -> Int32? {
        var attempts = 0
        while true {
            let fd = DiskChange.opening(flags: flags) { mirror_openat2_beneath(folder, path, flags, UInt32(mode)) }
            if fd >= 0 { return fd }
            let code = errno
            if code == EAGAIN && attempts < 8 { attempts += 1; continue }
            if code == EINTR { continue }
            if code != ENOSYS && code != EPERM { return -1 }
            return nil
        }
    }

    /// The fallback: one `openat(O_NOFOLLOW)` per component, relative to the previous descriptor.
    static func walk(_ components: [String], beneath folder: Int32, flags: Int32, mode: mode_t) -> Int32 {
        walk(components.map { Array($0.utf8) }, beneath: folder, flags: flags, mode: mode)
    }

    /// ``walk(_:beneath:flags:mode:)`` of names as bytes.
    static func walk(_ components: [[UInt8]], beneath folder: Int32, flags: Int32, mode: mode_t) -> Int32 {
        var current = folder
        defer { if current != folder { Glibc.close(current) } }
        for component in components.dropLast() {
            // O_PATH: a folder we only pass through needs search permission, not read permission.
            let next = component.withCString { openat(current, $0, mirror_O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            if next < 0 { return -1 }
            if current != folder { Glibc.close(current) }
            current = next
        }
        guard let last = components.last else {
            errno = EXDEV
            return -1
        }
        return retryingOnEINTR { last.withCString { DiskChange.openat(current, $0, flags, mode) } }
    }

    /// The components of a path that stays beneath its folder, or nil for one that could leave it
    /// (absolute, `..`) or is ambiguous (`.`, empty components): the manifest rules refuse those
    /// already; this is the last line of defence.
    static func components(of relative: String) -> [String]? {
        if relative.isEmpty || relative.hasPrefix("/") { return nil }
        let parts = relative.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        for part in parts where part.isEmpty || part == "." || part == ".." || part.utf8.contains(0) {
            return nil
        }
        return parts
    }

    /// Throws unless `fd` is a regular file with exactly one name.
    ///
    /// A file the tool writes to in place (the journal, the lock, a partial download it resumes)
    /// must be its own: a hard link planted under that name would let a truncation or a write reach
    /// another file (`fs.protected_hardlinks` prevents most such links, but not everywhere). The
    /// owner is not checked: a destination synced by root once and by a service account later is
    /// legitimate, and a user who can replace these files can already write the files they own.
    package static func requireSoleRegularFile(_ fd: Int32, _ displayPath: String) throws {
        var st = stat()
        if fstat(fd, &st) != 0 { throw SystemError("inspect", displayPath) }
        if st.st_mode & S_IFMT != S_IFREG {
            throw SystemError("write to", displayPath + " (not a regular file)", code: EINVAL)
        }
        if st.st_nlink != 1 {
            throw SystemError("write to", displayPath + " (a hard link: \(st.st_nlink) names share this file)", code: EMLINK)
        }
    }
}
