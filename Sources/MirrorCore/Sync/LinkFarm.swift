import MirrorFS
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// One walk of a set of files (DEST's plain folder or a generation) that hard-links what the
/// caller keeps into an atomic DEST's building folder, at the cost a hard-link farm must pay and
/// no more (docs/performance.md, "Atomic sets of a million files"): one `fstatat` and at most one
/// `linkat(2)` per file, each relative to an open folder (``FolderWalker``), the building folder's
/// matching folder opened once per folder, and each top-level folder walked on a thread of its
/// own (``WorkerPool``): a link is the kernel's work in the folder it names, and folders apart do
/// not wait for each other. Used to seed the next generation (``GenerationSeed``) and to keep a
/// plain DEST's set as a generation (``RunPlace``).
struct LinkFarm: Sendable {
    /// The set walked.
    let set: Destination
    /// Where links go.
    let building: Destination

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

    enum LinkResult { case linked, present, refused }

    /// Calls `visit` for every file of the set but the state folder, with a fresh `Part` per
    /// top-level folder (and one for the files at the top), and returns the parts. `visit` runs on
    /// several threads at once; each call has its own part and ``Linker``.
    func walk<Part: Sendable>(_ makePart: @escaping @Sendable () -> Part,
                              _ visit: @escaping @Sendable (File, inout Linker, inout Part) throws -> Void) throws -> [Part] {
        var top = makePart()
        var folders: [[UInt8]] = []
        do {
            var linker = Linker(building: building)
            defer { linker.close() }
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
                    try visit(File(name: name, status: status, folder: set.root.fd, parent: [], path: name), &linker, &top)
                }
            }
        }
        let found = Locked([Part]())
        let failure = Locked<SystemError?>(nil)
        let farm = self, named = folders
        WorkerPool.run(count: named.count, threads: WorkerPool.coreCount) { index in
            do {
                var part = makePart()
                try farm.walk(folder: named[index], visit, into: &part)
                found.withLock { $0.append(part) }
            } catch {
                let error = error as? SystemError
                    ?? SystemError("link", farm.building.display(String(decoding: named[index], as: UTF8.self)), code: EIO)
                failure.withLock { if $0 == nil { $0 = error } }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        return [top] + found.withLock { $0 }
    }

    /// One top-level folder of the set.
    private func walk<Part>(folder name: [UInt8], _ visit: (File, inout Linker, inout Part) throws -> Void, into part: inout Part) throws {
        let display = set.display(String(decoding: name, as: UTF8.self))
        let fd = name.withCString { openat(set.root.fd, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else {
            if errno == ENOENT { return }
            throw SystemError("open folder", display)
        }
        let folder = FileDescriptor(fd: fd, displayPath: display)
        let walker = try FolderWalker(folder)
        folder.close()
        var linker = Linker(building: building)
        defer { linker.close() }
        while let event = try walker.next() {
            guard case .entry(let file, let status) = event else { continue }
            let inner = walker.path
            let parent = inner.isEmpty ? name : name + [UInt8(ascii: "/")] + inner
            try visit(File(name: file, status: status, folder: walker.folder, parent: parent, path: parent + [UInt8(ascii: "/")] + file),
                      &linker, &part)
        }
    }

    /// Links files of the walk into the building folder, keeping the building folder's folder for
    /// the walk's current folder open: opened (and made) once per folder the walk links into, so
    /// folders with nothing to link are not made.
    struct Linker {
        let building: Destination
        private var path: [UInt8]?
        private var fd: FileDescriptor?

        init(building: Destination) { self.building = building }

        /// Links `file` to the same path in the building folder (`linkat(2)`): `present` when
        /// something is there already; `refused` when the file system will not link it there
        /// (`EMLINK`, `EXDEV`, `EPERM`) or its path is not UTF-8 (no manifest can name it).
        mutating func link(_ file: File) throws -> LinkResult {
            guard let relative = String(validating: file.path, as: UTF8.self) else { return .refused }
            let to = try folder(file.parent, for: relative)
            guard file.name.withCString({ DiskChange.linkat(file.folder, $0, to, $0, 0) }) == 0 else {
                if errno == EEXIST { return .present }
                if errno == EMLINK || errno == EXDEV || errno == EPERM { return .refused }
                throw SystemError("link", building.display(relative) + " into the next generation")
            }
            return .linked
        }

        private mutating func folder(_ parent: [UInt8], for relative: String) throws -> Int32 {
            if let fd, path == parent { return fd.fd }
            close()
            // Made without a fsync each: the building folder is made durable whole (`syncfs`)
            // before it is published.
            let (opened, _) = try building.openParent(of: relative, create: true, syncingNewFolders: false)
            fd = opened
            path = parent
            return opened.fd
        }

        mutating func close() {
            fd?.close()
            fd = nil
            path = nil
        }
    }
}
