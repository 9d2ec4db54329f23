import MirrorFS
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// Hard-links the files of a set (DEST's plain folder or a generation) that the caller keeps into
/// an atomic DEST's building folder, at the cost a hard-link farm must pay and no more
/// (docs/performance.md, "Atomic sets of a million files"): one ``SetWalk`` of the set and at
/// most one `linkat(2)` per file, each relative to an open folder, the building folder's matching
/// folder opened once per folder. A link is the kernel's work in the folder it names, and the
/// walk's top-level folders, each on a thread of its own, do not wait for each other. Used to
/// seed the next generation (``GenerationSeed``).
struct LinkFarm: Sendable {
    /// The set walked.
    let set: Destination
    /// Where links go.
    let building: Destination

    enum LinkResult { case linked, present, refused }

    /// Calls `visit` for every file of the set but the state folder, with a ``Linker`` it may link
    /// the file with (one per top-level folder) and a fresh `Part` per top-level folder; returns
    /// the parts (``SetWalk/walk(_:folder:ending:_:)``).
    func walk<Part: Sendable>(_ makePart: @escaping @Sendable () -> Part,
                              _ visit: @escaping @Sendable (SetWalk.File, inout Linker, inout Part) throws -> Void) throws -> [Part] {
        let building = building
        return try SetWalk(set: set).walk(makePart, folder: { Linker(building: building) }, ending: { $0.close() }, visit)
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
        mutating func link(_ file: SetWalk.File) throws -> LinkResult {
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
