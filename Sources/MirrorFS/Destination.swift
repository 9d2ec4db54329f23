import CLinux
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// The destination directory (DEST), opened once as a directory descriptor.
///
/// Every create, rename and stat below DEST goes through `openat2(2)` (``SafePath``), `mkdirat(2)`,
/// `renameat(2)` and `fstatat(2)` relative to that descriptor, and folders are opened with
/// `O_NOFOLLOW | O_DIRECTORY` (and `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the kernel has it),
/// so that a symlink planted inside DEST cannot redirect a write elsewhere (docs/cli.md, "State
/// on disk": sync never writes, deletes or follows a link outside DEST). A symlink in the way fails that one entry;
/// at `.mirror` or `.mirror/partial` it fails the run (exit 73), see SECURITY.md.
/// The tool's own state lives in `DEST/.mirror/` (journal, lock, partial downloads).
///
/// `Sendable`: everything is set in `init` but its two caches (the folder ``status(of:)`` looked
/// in last, the folder an install renamed into last), each kept with its lock (``Locked``).
public final class Destination: Sendable {
    public static let stateFolderName = ".mirror"

    /// DEST as the user named it, for messages.
    public let path: String
    package let root: FileDescriptor
    /// Where `.mirror` is: DEST itself, or for an atomic destination its store
    /// (``GenerationStore``), which outlives every generation.
    let stateRoot: FileDescriptor
    /// The generation store, when DEST is atomic.
    public let generations: GenerationStore?

    /// Opens an existing DEST. Returns nil when it does not exist. A file at the path is said to
    /// be one. DEST is found by what it is (``DestinationIdentity``): an atomic DEST (a symlink to
    /// a generation of ``GenerationStore``), named any way, opens as its current generation, with
    /// `.mirror` in the store; so does a plain DEST whose conversion began (its state is in the
    /// store already). A path into a store other than DEST's current set is refused.
    public static func openExisting(_ path: String) throws -> Destination? {
        try openExisting(DestinationIdentity.resolve(path))
    }

    /// DEST found before (``DestinationIdentity``): opened by its canonical path, named in
    /// messages as the user spelled it.
    public static func openExisting(_ identity: DestinationIdentity) throws -> Destination? {
        let path = identity.displayPath
        if let store = try? GenerationStore.open(identity, create: false) {
            switch store.current() {
            case .generation(let n):
                return Destination(path: path, root: try store.open(generation: n), stateRoot: store.store, generations: store)
            case .plainFolder where store.holdsState:
                guard let plain = try openFolder(identity.path, role: "the destination", displayPath: path) else { return nil }
                return Destination(path: path, root: plain.root, stateRoot: store.store, generations: store)
            default:
                break
            }
        }
        return try openFolder(identity.path, role: "the destination", displayPath: path)
    }

    /// Opens an existing folder as it is, no generation store looked for. Returns nil when it
    /// does not exist; a file at the path is said to be one (`role` names what the folder is for,
    /// in the message).
    public static func openFolder(_ path: String, role: String, displayPath: String? = nil) throws -> Destination? {
        let shown = displayPath ?? path
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            if errno == ENOTDIR { throw SystemError("use", "\(shown) as \(role) (it is a file, not a folder)", code: ENOTDIR) }
            throw SystemError("open \(role)", shown)
        }
        let root = FileDescriptor(fd: fd, displayPath: shown)
        return Destination(path: shown, root: root, stateRoot: root, generations: nil)
    }

    /// The next generation of an atomic DEST, as the folder a run installs into (``GenerationStore``).
    package static func building(_ store: GenerationStore) throws -> Destination {
        Destination(path: store.destPath, root: try store.building(), stateRoot: store.store, generations: store)
    }

    /// A complete generation DEST does not show, read as a source (`AtomicBuild.keptCopy(of:)`),
    /// named in messages by where it is (`DEST.generations/g2/PATH`).
    package static func keptGeneration(_ store: GenerationStore, _ n: Int) throws -> Destination {
        Destination(path: store.store.displayPath + "/g\(n)", root: try store.open(generation: n), stateRoot: store.store,
                    generations: store)
    }

    /// Opens DEST, creating it and its missing parents (mode 0755) first.
    public static func create(_ path: String) throws -> Destination {
        try makeDirectories(path)
        guard let dest = try openExisting(path) else { throw SystemError("open destination", path, code: ENOENT) }
        return dest
    }

    private init(path: String, root: FileDescriptor, stateRoot: FileDescriptor, generations: GenerationStore?) {
        self.path = path
        self.root = root
        self.stateRoot = stateRoot
        self.generations = generations
    }

    /// `mkdir -p` for DEST itself, which the user chose (so its own components may be symlinks).
    private static func makeDirectories(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += component
            if DiskChange.mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw SystemError("create destination folder", prefix)
            }
            prefix += "/"
        }
    }

    /// Human-readable path of something under DEST.
    public func display(_ relative: String) -> String {
        path.hasSuffix("/") ? path + relative : path + "/" + relative
    }

    /// Human-readable path of something in the state folder (`.mirror/journal`): under DEST, or
    /// for an atomic DEST in its store beside it (``GenerationStore``), where it really is.
    public func displayState(_ relative: String) -> String {
        generations.map { $0.store.displayPath + "/" + relative } ?? display(relative)
    }

    // MARK: - Reading

    /// The status of what is at `relative` (a final symlink is reported as one, not followed).
    /// nil when nothing is there.
    ///
    /// Throws a ``SystemError`` with `ENOTDIR`, naming the culprit, when one of its folders is a
    /// file (or anything else that is not a folder): the file could never be placed there, so the
    /// planner blocks the entry before any request instead of downloading it to fail at the
    /// rename (docs/faults.md).
    ///
    /// A path with folders is opened with `O_PATH | O_NOFOLLOW` through ``SafePath`` and `fstat`ed,
    /// so a symlink planted at one of its folders is not followed even for a look (it throws, and
    /// the planner blocks that entry); a lone name needs only `fstatat(AT_SYMLINK_NOFOLLOW)`.
    public func status(of relative: String) throws -> FileStatus? {
        var path = relative
        return try path.withUTF8 { try status(ofBytes: $0) }
    }

    /// ``status(of:)`` of a path given as its bytes (a manifest entry's ``ManifestPath``): the no-op
    /// path makes no `String` for the path, its folder or its name, which for a path of more than
    /// 15 bytes was a heap allocation each (docs/performance.md, "The no-op's `stat` on bytes").
    package func status(ofBytes relative: UnsafeBufferPointer<UInt8>) throws -> FileStatus? {
        var st = stat()
        func failed(_ code: Int32) throws -> FileStatus? {
            if code == ENOENT { return nil }
            let text = String(decoding: relative, as: UTF8.self)
            if code == ENOTDIR { throw notAFolder(on: text) }
            throw SystemError("inspect", display(text), code: code)
        }
        guard let slash = relative.lastIndex(of: UInt8(ascii: "/")) else {
            guard relative.withCString({ fstatat(root.fd, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0 else { return try failed(errno) }
            return FileStatus(st)
        }
        // The folder is opened through SafePath (no symlink followed on the way), once for all the
        // entries in it that come one after another (a sorted manifest lists a folder's files
        // together); the file is then one fstatat(AT_SYMLINK_NOFOLLOW) relative to it. On the no-op
        // path this is one system call per entry instead of three (openat2, fstat, close).
        let folder = UnsafeBufferPointer(rebasing: relative[..<slash])
        let name = UnsafeBufferPointer(rebasing: relative[(slash + 1)...])
        // Held until the fstatat is done: `mirror verify` asks from several threads, and another
        // thread's next folder would close this descriptor (and its number be reused) under us.
        return try statusCache.withLock { cache in
            var missing = false
            guard let fd = try statusFolder(folder, for: relative, missing: &missing, cache: &cache) else {
                // No such folder: no such file either (every entry of a new DEST, one call each).
                if missing { return nil }
                // Not a folder we can enter: a file, or a symlink in the way; the whole path,
                // opened the careful way, tells which.
                return try uncachedStatus(of: String(decoding: relative, as: UTF8.self))
            }
            guard name.withCString({ fstatat(fd, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0 else { return try failed(errno) }
            return FileStatus(st)
        }
    }

    /// `relative` opened with `O_PATH` through ``SafePath`` and `fstat`ed.
    private func uncachedStatus(of relative: String) throws -> FileStatus? {
        let fd = SafePath.open(relative, beneath: root.fd, flags: mirror_O_PATH)
        if fd < 0 {
            let code = errno
            if code == ENOENT { return nil }
            if code == ENOTDIR { throw notAFolder(on: relative) }
            throw openFailure("inspect", relative, code: code)
        }
        defer { close(fd) }
        var st = stat()
        if fstat(fd, &st) != 0 { throw SystemError("inspect", display(relative)) }
        return FileStatus(st)
    }

    /// The error for a path one of whose folders is not a folder (`ENOTDIR`): names the first
    /// such component and what it is. Each prefix is opened with `O_PATH` through ``SafePath``
    /// and `fstat`ed, so the look follows no symlink either; a symlink where a folder should be
    /// (`ENOTDIR` from the walk resolver, `ELOOP` from `openat2`) is named as one.
    private func notAFolder(on relative: String) -> SystemError {
        let components = relative.split(separator: "/", omittingEmptySubsequences: true).dropLast()
        var walked = ""
        for component in components {
            walked += walked.isEmpty ? String(component) : "/" + component
            let fd = SafePath.open(walked, beneath: root.fd, flags: mirror_O_PATH)
            var what: String?
            if fd < 0 {
                if errno == ELOOP { what = "a symbolic link" } else { break }
            } else {
                var st = stat()
                let ok = fstat(fd, &st) == 0
                close(fd)
                guard ok else { break }
                let found = FileStatus(st)
                if found.isDirectory { continue }
                what = found.isSymlink ? "a symbolic link" : found.isRegularFile ? "a file" : "not a regular file"
            }
            if let what {
                return SystemError("find", display(relative) + " (\(display(walked)) is \(what), not a folder; move it away so the file can be placed there)", code: ENOTDIR)
            }
        }
        // Changed since the failing call: say what failed, without a culprit.
        return SystemError("find", display(relative) + " (one of its folders is not a folder)", code: ENOTDIR)
    }

    /// Why ``SafePath/open(_:beneath:flags:)`` failed for `relative`: ELOOP and EXDEV mean a
    /// symlink (or an escape) in the path, which is refused, not followed; say so.
    private func openFailure(_ verb: String, _ relative: String, code: Int32) -> SystemError {
        if code == ELOOP || code == EXDEV {
            return SystemError(verb, display(relative) + " (a symlink in its path is not followed)", code: code)
        }
        return SystemError(verb, display(relative), code: code)
    }

    /// The same DEST (the same descriptors) with a folder cache of its own, for another thread
    /// planning other entries (`Reconciler.forEachAction(in:window:threads:known:_:)`): sharing one cache, two
    /// threads walking different folders would open a folder for nearly every entry.
    package func sibling() -> Destination {
        Destination(path: path, root: root, stateRoot: stateRoot, generations: generations)
    }

    /// The last folder ``status(of:)`` looked for: open, kept for the next entries in it, or nil
    /// when it did not exist, so that the next entries in a missing folder (every entry of a first
    /// sync) cost no `openat2` each. A folder this object makes (``openFolder(_:create:for:from:)``)
    /// ends a cached absence; a folder made by someone else meanwhile (another process, or
    /// through another `Destination` of the same tree: a ``sibling()`` only plans, before any
    /// install) only makes its files look absent a little longer, which costs a download that a
    /// link then refuses to put over them (``install(unnamed:name:partialFolder:to:syncFolder:)``
    /// renames instead): never a wrong file.
    private let statusCache = Locked<StatusFolder?>(nil)
    /// The last folder ``install(partial:from:to:syncFolder:expected:)`` renamed into, kept open
    /// for the next files of a batch (they are mostly in the same folder).
    let installFolder = Locked<InstallFolder?>(nil)

    /// The folder ``status(of:)`` looked in last (its path's bytes, and its descriptor or nil when
    /// it does not exist). A named type, not a tuple: a tuple's type is looked up at run time on
    /// each use of the generic ``Locked`` (a metadata cache lookup per entry, measured as 20 % of
    /// a no-op run's CPU), a nominal type's once.
    struct StatusFolder: Sendable {
        var path: [UInt8]
        var fd: Int32?
    }

    /// The folder an install renamed into last, kept open (see ``StatusFolder`` for why a struct).
    struct InstallFolder: Sendable {
        var path: String
        var folder: FileDescriptor
    }

    deinit {
        if let fd = statusCache.withLock({ $0?.fd }) { close(fd) }
    }

    /// A descriptor for `folder` (beneath DEST, opened without following symlinks), or nil when it
    /// does not exist (`missing` set: `ENOENT`) or is not a folder. Throws when a symlink is in the
    /// way. `cache` is ``statusCache``'s, whose lock the caller holds while it uses the descriptor.
    private func statusFolder(_ folder: UnsafeBufferPointer<UInt8>, for relative: UnsafeBufferPointer<UInt8>, missing: inout Bool,
                              cache statusCache: inout StatusFolder?) throws -> Int32? {
        // Bytes, never `String ==`: the NFC and NFD spellings of a folder are two folders here.
        if let cached = statusCache, cached.path.elementsEqual(folder) {
            missing = cached.fd == nil
            return cached.fd
        }
        let bytes = Array(folder)
        let fd = SafePath.open(bytes: bytes, beneath: root.fd, flags: mirror_O_PATH | O_DIRECTORY)
        if fd < 0 {
            let code = errno
            // ENOTDIR: a file, or a symlink (O_NOFOLLOW with O_DIRECTORY says so for both).
            missing = code == ENOENT
            if missing { cacheStatusFolder(bytes, nil, in: &statusCache) }
            if code == ENOENT || code == ENOTDIR { return nil }
            throw openFailure("inspect", String(decoding: relative, as: UTF8.self), code: code)
        }
        cacheStatusFolder(bytes, fd, in: &statusCache)
        return fd
    }

    private func cacheStatusFolder(_ folder: [UInt8], _ fd: Int32?, in statusCache: inout StatusFolder?) {
        if let old = statusCache?.fd { close(old) }
        statusCache = StatusFolder(path: folder, fd: fd)
    }

    /// A folder was made: a cached absence may be about it.
    private func forgetMissingStatusFolder() {
        statusCache.withLock { cache in
            if let cached = cache, cached.fd == nil { cache = nil }
        }
    }

    /// Opens a file under DEST for reading, refusing a symlink at any component.
    /// `O_NONBLOCK`, which does nothing to a regular file, keeps a FIFO swapped in since the plan
    /// from blocking the run; anything but a regular file is then refused.
    public func openForReading(_ relative: String) throws -> FileDescriptor {
        let fd = SafePath.open(relative, beneath: root.fd, flags: O_RDONLY | O_NONBLOCK)
        if fd < 0 { throw openFailure("open", relative, code: errno) }
        let file = FileDescriptor(fd: fd, displayPath: display(relative))
        guard try file.stat().isRegularFile else {
            throw SystemError("read", display(relative) + " (not a regular file)", code: EINVAL)
        }
        return file
    }

    // MARK: - Folders

    /// Opens (and with `create`, makes) every folder of `relative` but the last component, and
    /// returns that folder and the final name.
    /// `syncingNewFolders: false` leaves a folder it makes for a later `syncfs` to make durable: an
    /// atomic DEST's building folder, synced whole before it is published, where a `fsync` of
    /// each parent would cost a journal commit per folder.
    package func openParent(of relative: String, create: Bool, syncingNewFolders: Bool = true) throws -> (FileDescriptor, String) {
        var components = relative.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard let name = components.popLast() else { throw SystemError("open", display(relative), code: EINVAL) }
        return (try openFolder(components, create: create, for: relative, syncingNewFolders: syncingNewFolders), name)
    }

    /// Walks `components` from DEST one `openat(O_NOFOLLOW | O_DIRECTORY)` at a time, making missing
    /// folders with `mkdirat` when `create` is set. A symlink at any component fails with
    /// `ELOOP`/`ENOTDIR` instead of being followed.
    func openFolder(_ components: [String], create: Bool, for relative: String, from base: FileDescriptor? = nil,
                    syncingNewFolders: Bool = true) throws -> FileDescriptor {
        let root = base ?? self.root
        // The common case, a folder that exists: one openat2 lookup. Any failure (missing, a
        // symlink) takes the walk below, which creates what is missing and names the culprit.
        if !components.isEmpty {
            let fd = SafePath.open(components.joined(separator: "/"), beneath: root.fd, flags: O_RDONLY | O_DIRECTORY)
            if fd >= 0 { return FileDescriptor(fd: fd, displayPath: display(components.joined(separator: "/"))) }
        }
        var current = FileDescriptor(fd: dup(root.fd), displayPath: path)
        if current.fd < 0 { throw SystemError("open destination", path) }
        var walked = ""
        for component in components {
            walked += walked.isEmpty ? component : "/" + component
            var fd = SafePath.open(component, beneath: current.fd, flags: O_RDONLY | O_DIRECTORY)
            if fd < 0 && errno == ENOENT && create {
                if DiskChange.mkdirat(current.fd, component, 0o755) != 0 && errno != EEXIST {
                    throw SystemError("create folder", display(walked))
                }
                forgetMissingStatusFolder()
                // The new entry in `current` must survive a crash before anything inside it is journaled.
                if syncingNewFolders { try current.sync() }
                fd = SafePath.open(component, beneath: current.fd, flags: O_RDONLY | O_DIRECTORY)
            }
            if fd < 0 {
                let code = errno
                if code == ELOOP || code == ENOTDIR || code == EXDEV {
                    throw SystemError("use \(display(walked)) (a symlink or not a folder) for", display(relative), code: code)
                }
                throw SystemError("open folder", display(walked), code: code)
            }
            current = FileDescriptor(fd: fd, displayPath: display(walked))
        }
        return current
    }

    /// Opens `DEST/.mirror[/sub]`, creating it when `create` is set; nil when absent and not created.
    public func stateFolder(_ sub: String? = nil, create: Bool) throws -> FileDescriptor? {
        let components = [Destination.stateFolderName] + (sub.map { [$0] } ?? [])
        let relative = components.joined(separator: "/")
        do {
            return try openFolder(components, create: create, for: relative, from: stateRoot)
        } catch let error as SystemError where error.code == ENOENT && !create {
            return nil
        }
    }
}

extension FileStatus {
    /// Same inode on the same device: the same file, whatever its name now.
    package func sameFile(as other: FileStatus) -> Bool { inode == other.inode && device == other.device }
}
