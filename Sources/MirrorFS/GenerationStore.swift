import CLinux
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// The generations of an atomic destination (`mirror sync --atomic`; docs/cli.md, "Atomic
/// destinations"), laid out as OSTree and apt-mirror publish whole trees:
///
///     DEST                    -> DEST.generations/g3   (a symlink, relative)
///     DEST.generations/g2/    the previous complete set
///     DEST.generations/g3/    the current complete set
///     DEST.generations/building/   the next set while a run builds it
///     DEST.generations/.mirror/    journal, lock, partial downloads
///
/// A complete set is published by one `renameat(2)` of a new symlink over DEST, so a process that
/// opens DEST once (a directory descriptor, then `openat` beneath it) reads one whole set, the old
/// or the new, whatever happens to the run. A plain DEST folder is swapped for the symlink with
/// `renameat2(RENAME_EXCHANGE)`, so there is no moment without DEST either. Unchanged files are
/// hard links between generations: they take their space once.
///
/// `Sendable`: every stored property is a `let` of a `Sendable` type.
public final class GenerationStore: Sendable {
    public static let suffix = ".generations"
    package static let buildingName = "building"
    /// The new symlink's name in the store before it is renamed over DEST, and the old plain
    /// folder's after an exchange. It lives in the store, never in DEST's parent: mirror creates
    /// and removes nothing there but DEST and the store, so it never removes what it did not make.
    static let switchName = ".switch"
    /// Generations being removed (``prune(keep:)``) have this prefix: no command lists them.
    static let prunedPrefix = ".pruning-"

    /// DEST as the user named it, for messages.
    public let destPath: String
    /// What DEST is: the commands that open it again after a switch go by this, not by the
    /// spelling, which may have been the path of the generation DEST showed then.
    public let identity: DestinationIdentity
    /// DEST's folder, and DEST's name in it.
    let parent: FileDescriptor
    let name: String
    /// `DEST.generations`.
    public let store: FileDescriptor
    var storeName: String { name + GenerationStore.suffix }

    private init(identity: DestinationIdentity, parent: FileDescriptor, name: String, store: FileDescriptor) {
        self.identity = identity
        self.destPath = identity.displayPath
        self.parent = parent
        self.name = name
        self.store = store
    }

    /// The store of DEST, or nil when DEST has none and `create` is false. With `create`,
    /// DEST's folder and the store are made as needed. DEST is found by what it is
    /// (``DestinationIdentity``), so every spelling of it finds this one store.
    public static func open(_ destPath: String, create: Bool) throws -> GenerationStore? {
        try open(DestinationIdentity.resolve(destPath), create: create)
    }

    public static func open(_ identity: DestinationIdentity, create: Bool) throws -> GenerationStore? {
        let folder = identity.folder
        if create { _ = try Destination.create(folder) }
        let parentFd = Glibc.open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if parentFd < 0 {
            if errno == ENOENT && !create { return nil }
            throw SystemError("open folder", folder)
        }
        let parent = FileDescriptor(fd: parentFd, displayPath: folder)
        let storeName = identity.name + suffix
        if create && DiskChange.mkdirat(parent.fd, storeName, 0o755) == 0 { try parent.sync() }
        let fd = openat(parent.fd, storeName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT && !create { return nil }
            throw SystemError("open folder", identity.storePath)
        }
        let store = FileDescriptor(fd: fd, displayPath: identity.storePath)
        return GenerationStore(identity: identity, parent: parent, name: identity.name, store: store)
    }

    /// Whether DEST is an atomic destination: a symlink to a generation of its store, or a
    /// folder whose conversion has begun (the store holds DEST's state, `.mirror`).
    public static func isAtomic(_ destPath: String) -> Bool {
        guard let store = try? open(destPath, create: false) else { return false }
        if case .generation = store.current() { return true }
        return store.holdsState
    }

    /// Whoever could write the store or a set in it could plant a generation that DEST is then
    /// switched to, or files that are linked into the next one (SECURITY.md): a command that
    /// writes (sync, rollback) requires the store, its generations and `building/` to be this
    /// user's alone (``StateOwnership``), and stops with exit 73 otherwise. Reading commands
    /// (status, verify) do not ask: they trust nothing they find there.
    package func requireOwnership() throws {
        try StateOwnership.require(store, store.displayPath, mayChown: false)
        for entry in try store.entryNames() {
            let name = String(decoding: entry, as: UTF8.self)
            guard GenerationStore.number(name) != nil || name == GenerationStore.buildingName else { continue }
            var st = stat()
            // An adoption's leftover symlink (``removeAdoptionLeftover()``): no folder to check.
            if entry.withCString({ fstatat(store.fd, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0, FileStatus(st).isSymlink { continue }
            let folder = try openFolder(name)
            defer { folder.close() }
            try StateOwnership.require(folder, folder.displayPath, mayChown: false)
        }
    }

    /// The store holds DEST's state (`.mirror`): DEST is atomic, or being made so.
    public var holdsState: Bool {
        var st = stat()
        return fstatat(store.fd, Destination.stateFolderName, &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    public enum Current: Equatable {
        case none
        /// DEST is a plain folder (not yet atomic).
        case plainFolder
        case generation(Int)
        /// Something else (a foreign symlink, a file): never replaced.
        case other
    }

    /// What DEST is now (`fstatat` and `readlinkat` on its name, no link followed).
    public func current() -> Current {
        var st = stat()
        guard fstatat(parent.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return errno == ENOENT ? .none : .other }
        let status = FileStatus(st)
        if status.isDirectory { return .plainFolder }
        guard status.isSymlink else { return .other }
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlinkat(parent.fd, name, &buffer, buffer.count - 1)
        guard n > 0 else { return .other }
        let target = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let n = GenerationStore.generationNumber(inLink: target, storeName: storeName) else { return .other }
        return .generation(n)
    }

    /// `N` when a symlink's `target` is `STORE/gN`, the form ``switchTo(_:)`` writes; else nil.
    static func generationNumber(inLink target: String, storeName: String) -> Int? {
        let prefix = storeName + "/"
        guard target.hasPrefix(prefix) else { return nil }
        return number(String(target.dropFirst(prefix.count)))
    }

    /// `g12` is 12; anything else is no generation.
    package static func number(_ name: String) -> Int? {
        guard name.hasPrefix("g"), name.count > 1, name.count < 12, name.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(name.dropFirst())
    }

    /// The complete generations, oldest first.
    public func generations() throws -> [Int] {
        try store.entryNames().compactMap { entry -> Int? in
            guard let n = GenerationStore.number(String(decoding: entry, as: UTF8.self)) else { return nil }
            // A generation is a folder: a symlink of that name is an adoption's leftover
            // (``removeAdoptionLeftover()``), never a generation.
            var st = stat()
            guard entry.withCString({ fstatat(store.fd, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0, FileStatus(st).isDirectory else { return nil }
            return n
        }.sorted()
    }

    /// The generation's folder, opened without following a link.
    public func open(generation n: Int) throws -> FileDescriptor {
        try openFolder("g\(n)")
    }

    /// The folder the next generation is built in, made when absent.
    func building() throws -> FileDescriptor {
        if DiskChange.mkdirat(store.fd, GenerationStore.buildingName, 0o755) == 0 { try store.sync() }
        return try openFolder(GenerationStore.buildingName)
    }

    private func openFolder(_ entry: String) throws -> FileDescriptor {
        let fd = openat(store.fd, entry, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 { throw SystemError("open folder", store.displayPath + "/" + entry) }
        return FileDescriptor(fd: fd, displayPath: store.displayPath + "/" + entry)
    }

    /// Renames `building` to the next generation's name; returns its number. The caller made its
    /// files durable first (`syncfs`); the store's folder is synced here, so the name is durable
    /// before DEST is switched to it.
    package func sealBuilding() throws -> Int {
        let next = (try generations().last ?? 0) + 1
        if DiskChange.renameat(store.fd, GenerationStore.buildingName, store.fd, "g\(next)") != 0 {
            throw SystemError("publish", store.displayPath + "/g\(next)")
        }
        try store.sync()
        return next
    }

    /// Points DEST at generation `n` in one step: a new symlink (relative, `DEST.generations/gN`)
    /// is made in the store and renamed over DEST (`renameat`, across the two folders of one
    /// file system), or exchanged with a plain DEST folder (`renameat2(RENAME_EXCHANGE)`), whose
    /// old tree lands in the store and is then removed (its unchanged files live on as links in
    /// the generation).
    public func switchTo(_ n: Int) throws {
        try removeLeftoverSwitch()
        let link = GenerationStore.switchName
        if DiskChange.symlinkat(storeName + "/g\(n)", store.fd, link) != 0 {
            throw SystemError("create", store.displayPath + "/" + link)
        }
        switch current() {
        case .plainFolder:
            if DiskChange.renameExchange(store.fd, link, parent.fd, name) != 0 {
                throw SystemError("switch", destPath + " to generation \(n)")
            }
            try parent.sync()
            try store.sync()
            try removeLeftoverSwitch()
        case .other:
            _ = DiskChange.unlinkat(store.fd, link, 0)
            throw SystemError("switch", destPath + " (it is neither a folder nor a generation's symlink; move it away)", code: EEXIST)
        case .none, .generation:
            if DiskChange.renameat(store.fd, link, parent.fd, name) != 0 {
                throw SystemError("switch", destPath + " to generation \(n)")
            }
        }
        try parent.sync()
    }

    /// A symlink or an old DEST folder left in the store by a switch that a crash interrupted.
    func removeLeftoverSwitch() throws {
        // After a plain DEST's switch: its old folder, every file of the set.
        try FolderWalker.removeTree(Array(GenerationStore.switchName.utf8), in: store, threads: WorkerPool.coreCount)
    }

    /// Removes the complete generations beyond the newest `keep`, never the current one.
    /// Returns the numbers removed. Each is first renamed to a hidden name (and the store synced),
    /// then removed: a kill during the removal leaves a torn tree that no command lists or
    /// switches to, which the next run sweeps (``sweepLeftovers()``). A listed `gN` is always whole.
    package func prune(keep: Int) throws -> [Int] {
        guard case .generation(let now) = current() else { return [] }
        let all = try generations()
        let kept = Set(all.suffix(max(1, keep)) + [now])
        var removed: [Int] = []
        for n in all where !kept.contains(n) {
            let hidden = GenerationStore.prunedPrefix + "g\(n)"
            if DiskChange.renameat(store.fd, "g\(n)", store.fd, hidden) != 0 {
                throw SystemError("remove", store.displayPath + "/g\(n)")
            }
            try store.sync()
            CrashPoint.hit("prune-mid-removal")
            try FolderWalker.removeTree(Array(hidden.utf8), in: store, threads: WorkerPool.coreCount)
            removed.append(n)
        }
        if !removed.isEmpty { try store.sync() }
        return removed
    }

    /// Makes the plain folder DEST is generation 1, in one step and without a link or a copy: a
    /// symlink `STORE/g1` whose target is `STORE/g1` relative to DEST's folder is made in the
    /// store, then exchanged with DEST (`renameat2(RENAME_EXCHANGE)`): DEST is now that symlink,
    /// and the folder it names is the folder DEST was, with every file as it was (same inodes,
    /// same change times). A reader sees the same files before and after. Only for a DEST whose
    /// every file the journal vouches for, and with no generation yet (docs/cli.md, "Atomic
    /// destinations").
    package func adoptPlainFolder() throws -> Int {
        try removeAdoptionLeftover()
        let generation = "g1"
        if DiskChange.symlinkat(storeName + "/" + generation, store.fd, generation) != 0 {
            throw SystemError("create", store.displayPath + "/" + generation)
        }
        try store.sync()
        CrashPoint.hit("adopt-before-exchange")
        guard case .plainFolder = current(), DiskChange.renameExchange(store.fd, generation, parent.fd, name) == 0 else {
            let code = errno
            _ = DiskChange.unlinkat(store.fd, generation, 0)
            throw SystemError("switch", destPath + " to generation 1", code: code)
        }
        try parent.sync()
        try store.sync()
        return 1
    }

    /// A generation's name in the store that is a symlink, not a folder: what an adoption
    /// (``adoptPlainFolder()``) that a crash stopped before its exchange left. Removed, so that it
    /// is never taken for a generation.
    package func removeAdoptionLeftover() throws {
        for entry in try store.entryNames() where GenerationStore.number(String(decoding: entry, as: UTF8.self)) != nil {
            var st = stat()
            guard entry.withCString({ fstatat(store.fd, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0, FileStatus(st).isSymlink else { continue }
            if entry.withCString({ DiskChange.unlinkat(store.fd, $0, 0) }) != 0 && errno != ENOENT {
                throw SystemError("remove", store.displayPath + "/" + String(decoding: entry, as: UTF8.self))
            }
            try store.sync()
        }
    }

    /// Removes what a killed run left of generations it was pruning and of a switch.
    package func sweepLeftovers() throws {
        try removeLeftoverSwitch()
        try removeAdoptionLeftover()
        for entry in try store.entryNames() where entry.starts(with: Array(GenerationStore.prunedPrefix.utf8)) {
            try GenerationStore.removeTree(entry, in: store)
        }
    }

    /// `rm -r` of `name` in `folder`, no link followed (a symlink is removed, not entered).
    package static func removeTree(_ name: String, in folder: FileDescriptor) throws {
        try removeTree(Array(name.utf8), in: folder)
    }

    /// Names are bytes, as `readdir` gives them: a name that is not UTF-8 is removed too. Without
    /// recursion and with a bounded number of descriptors, however deep the tree (``FolderWalker``).
    static func removeTree(_ name: [UInt8], in folder: FileDescriptor) throws {
        try FolderWalker.removeTree(name, in: folder)
    }
}

extension GenerationStore {
    /// The store's state folder (`DEST.generations/.mirror`), opened without following a link
    /// and required to be this user's alone (``StateOwnership``).
    package func stateFolder() throws -> FileDescriptor {
        let display = store.displayPath + "/" + Destination.stateFolderName
        let fd = openat(store.fd, Destination.stateFolderName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 { throw SystemError("open folder", display) }
        let folder = FileDescriptor(fd: fd, displayPath: display)
        try StateOwnership.require(folder, display, mayChown: false)
        return folder
    }
}
