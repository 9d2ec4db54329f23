#if canImport(Glibc)
import Glibc
#endif

/// Walking DEST and removing from it, for deletions (docs/cli.md, "Deleting"). Paths are bytes,
/// as `readdir` gives them; every folder is opened with `openat(O_NOFOLLOW | O_DIRECTORY)` from
/// DEST's descriptor, so a symlink planted in DEST is removed as a link and never followed, and
/// nothing outside DEST is ever read or removed.
extension Destination {
    public struct Tree: Sendable {
        /// Everything that is not a folder (files, symlinks, sockets...), with its status.
        public var files: [(path: [UInt8], status: FileStatus)] = []
        public var folders: [[UInt8]] = []
    }

    /// Every name under DEST but `skipping` at its top (the state folder), depth first.
    func walk(skippingTopLevel skipping: String) throws -> Tree {
        var tree = Tree()
        let top = FileDescriptor(fd: dup(root.fd), displayPath: path)
        if top.fd < 0 { throw SystemError("read folder", path) }
        try walk(top, prefix: [], skipping: Array(skipping.utf8), into: &tree)
        return tree
    }

    private func walk(_ folder: FileDescriptor, prefix: [UInt8], skipping: [UInt8]?, into tree: inout Tree) throws {
        defer { folder.close() }
        for name in try folder.entryNames() {
            if let skipping, name == skipping { continue }
            let relative = prefix.isEmpty ? name : prefix + [UInt8(ascii: "/")] + name
            var st = stat()
            let found = name.withCString { fstatat(folder.fd, $0, &st, AT_SYMLINK_NOFOLLOW) }
            if found != 0 {
                if errno == ENOENT { continue }
                throw SystemError("inspect", display(String(decoding: relative, as: UTF8.self)))
            }
            let status = FileStatus(st)
            guard status.isDirectory else {
                tree.files.append((relative, status))
                continue
            }
            tree.folders.append(relative)
            let fd = name.withCString { openat(folder.fd, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            if fd < 0 { throw SystemError("open folder", display(String(decoding: relative, as: UTF8.self))) }
            try walk(FileDescriptor(fd: fd, displayPath: display(String(decoding: relative, as: UTF8.self))),
                     prefix: relative, skipping: nil, into: &tree)
        }
    }

    /// The folder `components` lead to, each opened without following a link; nil when one is gone.
    private func openFolder(bytes components: ArraySlice<[UInt8]>) throws -> FileDescriptor? {
        var current = FileDescriptor(fd: dup(root.fd), displayPath: path)
        if current.fd < 0 { throw SystemError("open destination", path) }
        for component in components {
            let fd = component.withCString { openat(current.fd, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            let code = errno
            current.close()
            if fd < 0 {
                if code == ENOENT { return nil }
                throw SystemError("open folder", display(String(decoding: Array(components.joined(separator: [UInt8(ascii: "/")])), as: UTF8.self)), code: code)
            }
            current = FileDescriptor(fd: fd, displayPath: path)
        }
        return current
    }

    public enum Removal: Sendable, Equatable {
        case removed
        /// Nothing is at the path any more.
        case gone
        /// Something other than the file planned is there now (changed, replaced): left alone.
        case changed
    }

    /// Removes the file at `relative` if it is still `expected` (same inode, device, size, mtime
    /// and ctime, by `fstatat` just before `unlinkat`): a file written or replaced since the plan
    /// stays. The folder's entry is made durable by the caller (``syncFolder(of:)``) or a `syncfs`.
    public func removeFile(_ relative: [UInt8], expected: FileStatus) throws -> Removal {
        let parts = relative.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init)
        guard let name = parts.last else { return .gone }
        guard let folder = try openFolder(bytes: parts.dropLast()[...]) else { return .gone }
        defer { folder.close() }
        var st = stat()
        if name.withCString({ fstatat(folder.fd, $0, &st, AT_SYMLINK_NOFOLLOW) }) != 0 {
            if errno == ENOENT { return .gone }
            throw SystemError("inspect", display(String(decoding: relative, as: UTF8.self)))
        }
        let now = FileStatus(st)
        guard !now.isDirectory, now.inode == expected.inode, now.device == expected.device, now.size == expected.size,
              now.mtime == expected.mtime, now.ctime == expected.ctime else { return .changed }
        if name.withCString({ unlinkat(folder.fd, $0, 0) }) != 0 {
            if errno == ENOENT { return .gone }
            throw SystemError("delete", display(String(decoding: relative, as: UTF8.self)))
        }
        return .removed
    }

    /// Makes every removal in DEST durable: one `syncfs(2)` for the whole file system.
    func syncAll() throws { try root.syncFilesystem() }

    /// Removes the folder at `relative` if it is empty (`unlinkat(AT_REMOVEDIR)`, which refuses a
    /// folder with anything in it). True when removed.
    public func removeFolderIfEmpty(_ relative: [UInt8]) -> Bool {
        let parts = relative.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init)
        guard let name = parts.last, let folder = try? openFolder(bytes: parts.dropLast()[...]) else { return false }
        defer { folder.close() }
        return name.withCString { unlinkat(folder.fd, $0, AT_REMOVEDIR) } == 0
    }
}

extension Array where Element == UInt8 {
    /// The bytes as a NUL-terminated C string (a name from `readdir` holds no NUL).
    func withCString<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
        var terminated = map { CChar(bitPattern: $0) }
        terminated.append(0)
        // Never nil: the array holds at least the terminating NUL.
        return terminated.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
