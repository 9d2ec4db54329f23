import CLinux
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// What stands where a listed file must go, and taking it away (the planner decides whether it may go; docs/cli.md, "A
/// path that turns"). Every look goes through ``SafePath`` with `O_PATH` (no symlink followed on
/// the way), every folder is opened with `openat(O_NOFOLLOW | O_DIRECTORY)`, and a removal is
/// ``removeFile(_:expected:)``'s `fstatat` and `unlinkat`, so nothing outside DEST is looked at or
/// removed, and a link in the way is seen as a link, never followed.
extension Destination {
    /// What is in the way of placing a file at `relative`: the first of its folders that is not a
    /// folder, or its own path when that is a folder (with everything beneath it). nil when
    /// nothing is (or the path cannot be looked at: the caller keeps its own error then).
    public func inTheWay(of relative: String) throws -> InTheWay? {
        let components = relative.split(separator: "/", omittingEmptySubsequences: true)
        var walked: [UInt8] = []
        for (i, component) in components.enumerated() {
            if !walked.isEmpty { walked.append(UInt8(ascii: "/")) }
            walked += component.utf8
            let fd = SafePath.open(String(decoding: walked, as: UTF8.self), beneath: root.fd, flags: mirror_O_PATH)
            // A symlink on the way (ELOOP), nothing there (ENOENT): nothing this can replace.
            if fd < 0 { return nil }
            var st = stat()
            let ok = fstat(fd, &st) == 0
            close(fd)
            guard ok else { return nil }
            let status = FileStatus(st)
            let last = i == components.count - 1
            if !status.isDirectory {
                // At the path itself, a file is the entry's own business (the planner's replace or check).
                return last ? nil : InTheWay(path: walked, files: [SeenFile(path: walked, status: status)])
            }
            if last { return try folderInTheWay(walked) }
        }
        return nil
    }

    /// The folder at `relative` and everything beneath it, walked with a list of folders still to
    /// read rather than by recursion (a deep tree costs no stack).
    private func folderInTheWay(_ relative: [UInt8]) throws -> InTheWay {
        var found = InTheWay(path: relative, files: [], folders: [relative])
        guard let top = try openTreeFolder(relative) else { return found }
        var pending: [(folder: FileDescriptor, prefix: [UInt8])] = [(top, relative)]
        defer { for item in pending { item.folder.close() } }
        while let (folder, prefix) = pending.popLast() {
            defer { folder.close() }
            for name in try folder.entryNames() {
                let path = prefix + [UInt8(ascii: "/")] + name
                var st = stat()
                if name.withCString({ fstatat(folder.fd, $0, &st, AT_SYMLINK_NOFOLLOW) }) != 0 {
                    if errno == ENOENT { continue }
                    throw SystemError("inspect", display(String(decoding: path, as: UTF8.self)))
                }
                let status = FileStatus(st)
                guard status.isDirectory else {
                    found.files.append(SeenFile(path: path, status: status))
                    continue
                }
                found.folders.append(path)
                let fd = name.withCString { openat(folder.fd, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
                if fd < 0 { throw SystemError("open folder", display(String(decoding: path, as: UTF8.self))) }
                pending.append((FileDescriptor(fd: fd, displayPath: display(String(decoding: path, as: UTF8.self))), path))
            }
        }
        return found
    }

    /// The folder at `relative`, opened for reading without following a link anywhere on the way;
    /// nil when it is gone.
    private func openTreeFolder(_ relative: [UInt8]) throws -> FileDescriptor? {
        let text = String(decoding: relative, as: UTF8.self)
        let fd = SafePath.open(text, beneath: root.fd, flags: O_RDONLY | O_DIRECTORY)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw SystemError("open folder", display(text))
        }
        return FileDescriptor(fd: fd, displayPath: display(text))
    }

    /// Takes away what `clearance` names: each file only if it is still the file that was decided
    /// on (by ``removeFile(_:expected:)``'s `fstatat` just before its `unlinkat`), then the folders,
    /// deepest first, each only if empty (`unlinkat(AT_REMOVEDIR)`). Every file is looked at before
    /// the first goes, so one changed since the decision leaves them all. Returns the files removed
    /// (or found gone). The caller makes the removals durable with the new file's rename (the
    /// `fsync` of its folder, or a `syncfs`).
    public func clear(_ clearance: InTheWay.Clearance) throws -> [[UInt8]] {
        for item in clearance.files {
            guard let now = try status(ofBytes: item.path), now.sameFile(as: item.status), now.size == item.status.size,
                  now.mtime == item.status.mtime, now.ctime == item.status.ctime else { throw changed(item.path) }
        }
        var removed: [[UInt8]] = []
        for item in clearance.files {
            switch try removeFile(item.path, expected: item.status) {
            case .removed, .gone: removed.append(item.path)
            case .changed: throw changed(item.path)
            }
        }
        for folder in clearance.folders { _ = removeFolderIfEmpty(folder) }
        return removed
    }

    private func changed(_ path: [UInt8]) -> SystemError {
        SystemError("replace", display(String(decoding: path, as: UTF8.self)) + " (it changed while the run went on; move it away)",
                    code: EEXIST)
    }

    /// What is at `relative` (bytes), through ``SafePath`` (`O_PATH`, no link followed); nil when nothing is.
    private func status(ofBytes relative: [UInt8]) throws -> FileStatus? {
        let text = String(decoding: relative, as: UTF8.self)
        let fd = SafePath.open(text, beneath: root.fd, flags: mirror_O_PATH)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw SystemError("inspect", display(text))
        }
        defer { close(fd) }
        var st = stat()
        if fstat(fd, &st) != 0 { throw SystemError("inspect", display(text)) }
        return FileStatus(st)
    }
}
