#if canImport(Glibc)
import Glibc
#endif

/// What a DEST path names, found from the folder it leads to rather than from its spelling
/// (docs/cli.md, "One run at a time").
///
/// `media`, `media/.`, `$PWD/media`, a symlink to `media` and, for an atomic DEST, the path of
/// the generation it shows (`media.generations/g3`) all name one destination: the folder `media`
/// in its canonical parent (`realpath(3)`). Every command finds DEST's lock and state from this
/// identity, so two spellings can never take two locks. A path that leads into a generation
/// store other than DEST's current set (an older generation, `building/`, the store itself) is
/// refused: a run there would make a `.mirror` inside a set that another DEST owns.
public struct DestinationIdentity: Sendable, Equatable {
    /// DEST as the user named it, for messages.
    public let displayPath: String
    /// The canonical folder DEST is in, and DEST's name in it (never `.`, `..` or empty).
    public let folder: String
    public let name: String

    /// DEST by its canonical path.
    public var path: String { folder == "/" ? "/" + name : folder + "/" + name }
    /// The generation store beside DEST (``GenerationStore``), whether or not it exists.
    public var storePath: String { path + GenerationStore.suffix }

    /// Resolves `destPath`. A DEST that does not exist yet is named by its parent's canonical
    /// path (when the parent exists) and its last component.
    public static func resolve(_ destPath: String) throws -> DestinationIdentity {
        try resolve(destPath, links: 0).renamed(destPath)
    }

    /// `links` counts the dangling symlinks followed so far; past 40 (Linux's own limit on a path's
    /// symlinks, `ELOOP` in path_resolution(7)) the path is refused.
    private static func resolve(_ destPath: String, links: Int) throws -> DestinationIdentity {
        // An atomic DEST's own symlink (`media -> media.generations/g3`) names DEST even when the
        // generation is gone: it is judged before anything is followed.
        if let (folder, name) = lexicalSplit(destPath), let target = symlinkTarget(destPath),
           GenerationStore.generationNumber(inLink: target, storeName: name + GenerationStore.suffix) != nil {
            return DestinationIdentity(displayPath: destPath, folder: canonical(folder) ?? folder, name: name)
        }
        // The path as it is on disk: every component resolved, or for a DEST not made yet, its
        // parent's (when that exists) and its name.
        let folder: String, name: String
        if let real = canonical(destPath) {
            guard let split = lexicalSplit(real) else {
                throw SystemError("use", "\(destPath) as the destination (it is the root folder)", code: EINVAL)
            }
            (folder, name) = split
        } else {
            guard let split = lexicalSplit(destPath) else {
                throw SystemError("use", "\(destPath) as the destination (it names no folder)", code: EINVAL)
            }
            // A symlink to a DEST that does not exist yet (an atomic DEST before its first
            // generation, a plain DEST not made) names that DEST, as it will once the DEST exists:
            // the link is followed by its text, never made a DEST of its own beside it.
            if let target = symlinkTarget(join(split.folder, split.name)) {
                guard links < 40 else {
                    throw SystemError("use", "\(destPath) as the destination (too many levels of symbolic links)", code: ELOOP)
                }
                return try resolve(target.hasPrefix("/") ? target : join(split.folder, target), links: links + 1)
            }
            (folder, name) = (canonical(split.folder) ?? split.folder, split.name)
        }
        if let owner = try storeOwner(of: folder, name, named: destPath) { return owner }
        return DestinationIdentity(displayPath: destPath, folder: folder, name: name)
    }

    private func renamed(_ display: String) -> DestinationIdentity {
        DestinationIdentity(displayPath: display, folder: folder, name: name)
    }

    /// When `name` in `folder` is, or lies inside, a generation store (`X.generations` holding
    /// `.mirror`): DEST `X` if the path is exactly the generation X's symlink shows; any other path
    /// in a store (the store itself, an older generation, `building/`, a generation not made, a
    /// folder inside one) is refused. nil when the path is in no store.
    private static func storeOwner(of folder: String, _ name: String, named destPath: String) throws -> DestinationIdentity? {
        var inside: [String] = [name]
        var at = folder
        var store: (outer: String, name: String)?
        while true {
            if let (outer, last) = lexicalSplit(at), last.hasSuffix(GenerationStore.suffix),
               isFolder(at + "/" + Destination.stateFolderName) {
                store = (outer, last)
                break
            }
            guard let (outer, last) = lexicalSplit(at), outer != at else { break }
            inside.insert(last, at: 0)
            at = outer
        }
        // The store itself is the last component: `inside` is then the path below it.
        if store == nil, name.hasSuffix(GenerationStore.suffix), isFolder(join(folder, name) + "/" + Destination.stateFolderName) {
            store = (folder, name)
            inside = []
        }
        guard let (outer, storeName) = store else { return nil }
        let dest = String(storeName.dropLast(GenerationStore.suffix.count))
        let owner = DestinationIdentity(displayPath: join(outer, dest), folder: outer, name: dest)
        if inside.count == 1, let target = symlinkTarget(owner.path),
           let shown = GenerationStore.generationNumber(inLink: target, storeName: storeName), "g\(shown)" == inside[0] {
            return owner
        }
        let what: String
        switch inside.first {
        case nil: what = "the generation store"
        case GenerationStore.buildingName?: what = "in the folder the next generation is built in"
        case let first? where GenerationStore.number(first) != nil && inside.count == 1: what = "a generation other than the one it shows"
        default: what = "inside a generation"
        }
        throw SystemError("use", "\(destPath) as the destination (it is \(what) of the atomic destination \(owner.path); "
            + "name \(owner.path) instead)", code: EINVAL)
    }

    /// `realpath(3)`: every symlink, `.` and `..` resolved; nil when the path does not exist.
    static func canonical(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The target of the symlink at `path` (`readlink(2)`), or nil when it is not one.
    static func symlinkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func isFolder(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// A path's folder and last component, from its spelling: `lab/media/` and `lab/media/.` are
    /// `media` in `lab`; nil when the last component is `..`, a lone `.` or missing.
    static func lexicalSplit(_ destPath: String) -> (folder: String, name: String)? {
        var path = Substring(destPath)
        while path.count > 1 && (path.hasSuffix("/") || path.hasSuffix("/.")) { path = path.dropLast() }
        guard let slash = path.lastIndex(of: "/") else {
            return path.isEmpty || path == "." || path == ".." ? nil : (".", String(path))
        }
        let name = String(path[path.index(after: slash)...])
        let folder = slash == path.startIndex ? "/" : String(path[..<slash])
        guard !name.isEmpty, name != ".", name != ".." else { return nil }
        return (folder, name)
    }

    private static func join(_ folder: String, _ name: String) -> String {
        folder == "/" ? "/" + name : folder + "/" + name
    }
}
