import MirrorFS
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// One walk of a set of files (DEST's plain folder or a generation), at the cost of a `find` stat
/// walk: one `fstatat` per file, relative to its open folder (``FolderWalker``), each top-level
/// folder walked on a thread of its own (``WorkerPool``), nothing kept of the walk itself. What
/// each thread finds goes into a part of its own; the parts are returned together.
///
/// Used to link what the next generation keeps (``LinkFarm``), to check that the journal vouches
/// for every file of a plain set kept as a generation (``RunPlace``), and to check that a set a
/// filter left files in is complete (``AtomicBuild``).
struct SetWalk: Sendable {
    /// The set walked.
    let set: Destination

    /// A file of the set, as the walk finds it.
    struct File {
        /// Its name, in ``folder``.
        var name: [UInt8]
        var status: FileStatus
        /// The open folder it is in (valid during the visit only).
        var folder: Int32
        /// Its folder's path in the set (empty at the top).
        var parent: [UInt8]
        /// Its path in the set.
        var path: [UInt8]
    }

    /// Calls `visit` for every file of the set but the state folder, with a fresh `Part` per
    /// top-level folder (and one for the files at the top), and returns the parts. `visit` runs on
    /// several threads at once; each call has its own part, and its own `Folder` state: made by
    /// `makeFolder` for each top-level folder and ended by `end` after its last file.
    func walk<Part: Sendable, Folder>(_ makePart: @escaping @Sendable () -> Part,
                                      folder makeFolder: @escaping @Sendable () -> Folder,
                                      ending end: @escaping @Sendable (inout Folder) -> Void,
                                      _ visit: @escaping @Sendable (File, inout Folder, inout Part) throws -> Void) throws -> [Part] {
        var top = makePart()
        var folders: [[UInt8]] = []
        do {
            var state = makeFolder()
            defer { end(&state) }
            for name in try set.root.entryNames() where name != Array(Destination.stateFolderName.utf8) {
                var st = stat()
                guard name.withCString({ fstatat(set.root.fd, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0 else {
                    if errno == ENOENT { continue }
                    throw SystemError("inspect", set.display(String(decoding: name, as: UTF8.self)))
                }
                let status = FileStatus(st)
                if status.isDirectory {
                    folders.append(name)
                } else {
                    try visit(File(name: name, status: status, folder: set.root.fd, parent: [], path: name), &state, &top)
                }
            }
        }
        let found = Locked([Part]())
        let failure = Locked<SystemError?>(nil)
        let walk = self, named = folders
        WorkerPool.run(count: named.count, threads: WorkerPool.coreCount) { index in
            do {
                var part = makePart()
                var state = makeFolder()
                defer { end(&state) }
                try walk.walk(folder: named[index], { try visit($0, &state, &$1) }, into: &part)
                found.withLock { $0.append(part) }
            } catch {
                let error = error as? SystemError
                    ?? SystemError("walk", walk.set.display(String(decoding: named[index], as: UTF8.self)), code: EIO)
                failure.withLock { if $0 == nil { $0 = error } }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        return [top] + found.withLock { $0 }
    }

    /// The same, with no state per folder: a walk that only looks.
    func walk<Part: Sendable>(_ makePart: @escaping @Sendable () -> Part,
                              _ visit: @escaping @Sendable (File, inout Part) throws -> Void) throws -> [Part] {
        try walk(makePart, folder: {}, ending: { _ in }) { file, _, part in try visit(file, &part) }
    }

    /// One top-level folder of the set.
    private func walk<Part>(folder name: [UInt8], _ visit: (File, inout Part) throws -> Void, into part: inout Part) throws {
        let display = set.display(String(decoding: name, as: UTF8.self))
        let fd = name.withCString { openat(set.root.fd, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else {
            if errno == ENOENT { return }
            throw SystemError("open folder", display)
        }
        let folder = FileDescriptor(fd: fd, displayPath: display)
        let walker = try FolderWalker(folder)
        folder.close()
        while let event = try walker.next() {
            guard case .entry(let file, let status) = event else { continue }
            let inner = walker.path
            let parent = inner.isEmpty ? name : name + [UInt8(ascii: "/")] + inner
            try visit(File(name: file, status: status, folder: walker.folder, parent: parent, path: parent + [UInt8(ascii: "/")] + file),
                      &part)
        }
    }
}
