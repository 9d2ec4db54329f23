import CLinux
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
public final class GenerationStore {
    public static let suffix = ".generations"
    static let buildingName = "building"
    /// The new symlink's name before it is renamed over DEST (and the old folder's, after an exchange).
    var switchName: String { "." + name + ".mirror-switch" }

    /// DEST as the user named it, for messages.
    public let destPath: String
    /// DEST's folder, and DEST's name in it.
    let parent: FileDescriptor
    let name: String
    /// `DEST.generations`.
    public let store: FileDescriptor
    var storeName: String { name + GenerationStore.suffix }

    private init(destPath: String, parent: FileDescriptor, name: String, store: FileDescriptor) {
        self.destPath = destPath
        self.parent = parent
        self.name = name
        self.store = store
    }

    /// DEST's folder and name: `lab/media/` is `media` in `lab`.
    static func split(_ destPath: String) -> (folder: String, name: String)? {
        var path = Substring(destPath)
        while path.count > 1 && path.hasSuffix("/") { path = path.dropLast() }
        guard let slash = path.lastIndex(of: "/") else { return path.isEmpty ? nil : (".", String(path)) }
        let name = String(path[path.index(after: slash)...])
        let folder = slash == path.startIndex ? "/" : String(path[..<slash])
        guard !name.isEmpty, name != ".", name != ".." else { return nil }
        return (folder, name)
    }

    /// The store of DEST, or nil when DEST is not atomic (no store beside it) and `create` is
    /// false. With `create`, DEST's folder and the store are made as needed.
    public static func open(_ destPath: String, create: Bool) throws -> GenerationStore? {
        guard let (folder, name) = split(destPath) else {
            throw SystemError("use", "\(destPath) as an atomic destination (it names no folder)", code: EINVAL)
        }
        if create { _ = try Destination.create(folder) }
        let parentFd = Glibc.open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if parentFd < 0 {
            if errno == ENOENT && !create { return nil }
            throw SystemError("open folder", folder)
        }
        let parent = FileDescriptor(fd: parentFd, displayPath: folder)
        let storeName = name + suffix
        if create && mkdirat(parent.fd, storeName, 0o755) == 0 { try parent.sync() }
        let fd = openat(parent.fd, storeName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT && !create { return nil }
            throw SystemError("open folder", folder + "/" + storeName)
        }
        let display = folder == "." && !destPath.hasPrefix("./") ? storeName : (folder.hasSuffix("/") ? folder : folder + "/") + storeName
        return GenerationStore(destPath: destPath, parent: parent, name: name, store: FileDescriptor(fd: fd, displayPath: display))
    }

    /// Whether DEST is an atomic destination: a symlink to a generation of its store.
    public static func isAtomic(_ destPath: String) -> Bool {
        guard let store = try? open(destPath, create: false), case .generation = store.current() else { return false }
        return true
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
        let prefix = storeName + "/"
        guard target.hasPrefix(prefix), let n = GenerationStore.number(String(target.dropFirst(prefix.count))) else { return .other }
        return .generation(n)
    }

    /// `g12` is 12; anything else is no generation.
    static func number(_ name: String) -> Int? {
        guard name.hasPrefix("g"), name.count > 1, name.count < 12, name.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(name.dropFirst())
    }

    /// The complete generations, oldest first.
    public func generations() throws -> [Int] {
        try store.entryNames().compactMap { GenerationStore.number(String(decoding: $0, as: UTF8.self)) }.sorted()
    }

    /// The generation's folder, opened without following a link.
    public func open(generation n: Int) throws -> FileDescriptor {
        try openFolder("g\(n)")
    }

    /// The folder the next generation is built in, made when absent.
    func building() throws -> FileDescriptor {
        if mkdirat(store.fd, GenerationStore.buildingName, 0o755) == 0 { try store.sync() }
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
    func sealBuilding() throws -> Int {
        let next = (try generations().last ?? 0) + 1
        if renameat(store.fd, GenerationStore.buildingName, store.fd, "g\(next)") != 0 {
            throw SystemError("publish", store.displayPath + "/g\(next)")
        }
        try store.sync()
        return next
    }

    /// Points DEST at generation `n` in one step: a new symlink is made beside DEST and renamed
    /// over it (`renameat`), or exchanged with a plain DEST folder (`renameat2(RENAME_EXCHANGE)`),
    /// whose old tree is then removed (its unchanged files live on as links in the generation).
    public func switchTo(_ n: Int) throws {
        try removeLeftoverSwitch()
        if symlinkat(storeName + "/g\(n)", parent.fd, switchName) != 0 {
            throw SystemError("create", parent.displayPath + "/" + switchName)
        }
        switch current() {
        case .plainFolder:
            if mirror_rename_exchange(parent.fd, switchName, parent.fd, name) != 0 {
                throw SystemError("switch", destPath + " to generation \(n)")
            }
            try parent.sync()
            try removeLeftoverSwitch()
        case .other:
            _ = unlinkat(parent.fd, switchName, 0)
            throw SystemError("switch", destPath + " (it is neither a folder nor a generation's symlink; move it away)", code: EEXIST)
        case .none, .generation:
            if renameat(parent.fd, switchName, parent.fd, name) != 0 {
                throw SystemError("switch", destPath + " to generation \(n)")
            }
        }
        try parent.sync()
    }

    /// A symlink or an old DEST folder left by a switch that a crash interrupted.
    func removeLeftoverSwitch() throws {
        var st = stat()
        guard fstatat(parent.fd, switchName, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return }
        if FileStatus(st).isDirectory {
            try GenerationStore.removeTree(switchName, in: parent)
        } else if unlinkat(parent.fd, switchName, 0) != 0 && errno != ENOENT {
            throw SystemError("remove", parent.displayPath + "/" + switchName)
        }
    }

    /// Removes the complete generations beyond the newest `keep`, never the current one.
    /// Returns the numbers removed.
    func prune(keep: Int) throws -> [Int] {
        guard case .generation(let now) = current() else { return [] }
        let all = try generations()
        let kept = Set(all.suffix(max(1, keep)) + [now])
        var removed: [Int] = []
        for n in all where !kept.contains(n) {
            try GenerationStore.removeTree("g\(n)", in: store)
            removed.append(n)
        }
        if !removed.isEmpty { try store.sync() }
        return removed
    }

    /// `rm -r` of `name` in `folder`, no link followed (a symlink is removed, not entered).
    static func removeTree(_ name: String, in folder: FileDescriptor) throws {
        try removeTree(Array(name.utf8), in: folder)
    }

    /// Names are bytes, as `readdir` gives them: a name that is not UTF-8 is removed too. Without
    /// recursion and with a bounded number of descriptors, however deep the tree (``FolderWalker``).
    static func removeTree(_ name: [UInt8], in folder: FileDescriptor) throws {
        try FolderWalker.removeTree(name, in: folder)
    }
}
