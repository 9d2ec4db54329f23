import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// How many entries that are not folders a tree holds (files, symlinks, anything else), counted
/// from the folders' listings alone: `readdir(3)`'s `d_type`, no `stat` per entry (an
/// `fstatat` only where the file system does not fill `d_type` in).
///
/// Why: an atomic no-op has already found every manifest entry in the current set, each with
/// the `stat` its journal record vouches for (``Destination/status(of:)``); what is left to know
/// is that the set holds nothing else, which a count says without a `stat` per file.
/// Each top-level folder is counted on a thread of its own (``WorkerPool``).
///
/// A folder deeper than ``maxDepth`` below the root is not counted: the count is then nil and the
/// caller walks the set itself (``FolderWalker``, with its bounded descriptors).
package enum FileCount {
    /// Folders open at once on one thread's way down (a descriptor each, on each of up to a
    /// thread per core: well under `ulimit -n`).
    package static let maxDepth = 24

    /// The entries that are not folders under `root`, the top-level `skipping` left out; nil when
    /// a folder is too deep to count here.
    package static func nonFolders(under root: FileDescriptor, skippingTopLevel skipping: [UInt8]?) throws -> Int? {
        var top = 0
        var folders: [[UInt8]] = []
        let copy = dup(root.fd)
        if copy < 0 { throw SystemError("read folder", root.displayPath) }
        try listing(copy, displayPath: root.displayPath) { _, name, isFolder in
            if let skipping, name == skipping { return }
            if try isFolder() { folders.append(name) } else { top += 1 }
        }
        let counted = Locked((total: top, tooDeep: false))
        let failure = Locked<SystemError?>(nil)
        let named = folders
        WorkerPool.run(count: named.count, threads: WorkerPool.coreCount) { index in
            do {
                let n = try count(named[index], in: root.fd, displayPath: root.displayPath, depth: 1)
                counted.withLock { $0.total += n ?? 0; if n == nil { $0.tooDeep = true } }
            } catch {
                let error = error as? SystemError ?? SystemError("read folder", root.displayPath, code: EIO)
                failure.withLock { if $0 == nil { $0 = error } }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        let result = counted.withLock { $0 }
        return result.tooDeep ? nil : result.total
    }

    /// The folder `name` of `parent`, counted depth first; nil when too deep.
    private static func count(_ name: [UInt8], in parent: Int32, displayPath: String, depth: Int) throws -> Int? {
        guard depth <= maxDepth else { return nil }
        let shown = displayPath + "/" + String(decoding: name, as: UTF8.self)
        let fd = name.withCString { openat(parent, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else {
            // Gone since the listing: nothing to count.
            if errno == ENOENT { return 0 }
            throw SystemError("open folder", shown)
        }
        var total = 0
        var deep = false
        try listing(fd, displayPath: shown) { folder, child, isFolder in
            guard !deep else { return }
            if try isFolder() {
                guard let n = try count(child, in: folder, displayPath: shown, depth: depth + 1) else {
                    deep = true
                    return
                }
                total += n
            } else {
                total += 1
            }
        }
        return deep ? nil : total
    }

    /// Calls `body` for each name of the folder `fd` (not `.` or `..`) with the folder's
    /// descriptor and a way to ask whether the name is a folder: `d_type`, or
    /// `fstatat(AT_SYMLINK_NOFOLLOW)` when that is `DT_UNKNOWN`. Takes `fd` over and closes it.
    private static func listing(_ fd: Int32, displayPath: String,
                                _ body: (Int32, [UInt8], () throws -> Bool) throws -> Void) throws {
        try FileDescriptor.forEachEntry(takingOver: fd, displayPath: displayPath) { name, type in
            try body(fd, name) {
                if type != UInt8(DT_UNKNOWN) { return type == UInt8(DT_DIR) }
                var st = stat()
                guard name.withCString({ fstatat(fd, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0 else {
                    if errno == ENOENT { return false }
                    throw SystemError("inspect", displayPath + "/" + String(decoding: name, as: UTF8.self))
                }
                return FileStatus(st).isDirectory
            }
        }
    }
}
