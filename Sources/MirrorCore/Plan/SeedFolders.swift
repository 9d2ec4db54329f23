import MirrorFS
import MirrorKit
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// The `--seed` folders of a run (docs/cli.md, "Reuse by content"): files a user offers as sources
/// of entries' bytes, read as DEST is, never through a link.
///
/// Why: a seed is often someone else's tree (a neighbour's share, a USB disk). Opened by path, a
/// folder swapped for a symlink between the walk and the open would lead the read anywhere the
/// running user may read (root: anywhere), and whether the run then copied tells the seed's owner
/// whether a file they cannot read holds given bytes. So each seed folder is opened once
/// (`open(O_DIRECTORY)`, the one path the user named), walked beneath that descriptor by
/// ``FolderWalker`` (`openat(O_NOFOLLOW | O_DIRECTORY)` per folder, names as bytes, no recursion),
/// and each file is opened beneath it with ``SafePath`` (`openat2(RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS)`, else one `openat(O_NOFOLLOW)` per component): a symlink anywhere on the
/// way, at a file or a folder, fails the open. Only regular files are candidates, and a folder
/// named `.mirror` (a destination's state) is left out.
///
/// The walk is made at the first question (a run that needs nothing never walks), and a file is
/// hashed at most once per run; how many are hashed for one entry is ``SeedBudget``'s.
final class SeedFolders {
    /// A regular file found by the walk: its seed folder, its path beneath it, its size then.
    struct File {
        let folder: Int
        let path: [UInt8]
        let size: Int64
    }

    private struct NameKey: Hashable {
        let size: Int64
        let name: ArraySlice<UInt8>
    }

    private struct DigestKey: Hashable {
        let algorithm: DigestAlgorithm
        let digest: Digest
    }

    private let folders: [FileDescriptor]
    let budget: SeedBudget
    private var walked = false
    private var files: [File] = []
    /// Indices into ``files`` by size, and by size and file name, in ``SeedBudget/order(_:for:)``'s
    /// order of paths (the walk's files are sorted once).
    private var bySize: [Int64: [Int]] = [:]
    private var byName: [NameKey: [Int]] = [:]
    /// Where in ``bySize``'s list the files not yet tried for that size begin.
    private var nextOther: [Int64: Int] = [:]
    private var digests: [Int: DigestSet] = [:]
    private var byDigest: [DigestKey: [Int]] = [:]
    /// Seed files hashed so far in this run (a file hashed again for another algorithm counts twice).
    private(set) var hashes = 0

    /// Opens each folder of `paths` (a folder gone since the arguments were checked is left out).
    init(paths: [String], budget: SeedBudget = .standard) {
        self.budget = budget
        folders = paths.compactMap { path in
            let fd = retryingOnEINTR { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
            guard fd >= 0 else { return nil }
            // The name given, without a trailing slash, so that a file's is `DIR/name`.
            var display = path
            while display.count > 1 && display.hasSuffix("/") { display.removeLast() }
            return FileDescriptor(fd: fd, displayPath: display)
        }
    }

    var isEmpty: Bool { folders.isEmpty }

    /// A seed file whose bytes are `entry`'s (hashed, and opened beneath its folder); nil when none
    /// of the candidates ``budget`` allows has them.
    func source(for entry: ManifestEntry) -> (file: FileDescriptor, display: String)? {
        guard !folders.isEmpty else { return nil }
        walkOnce()
        // Files hashed for earlier entries: compared from memory.
        if let (algorithm, digest) = entry.digests.first(where: { _ in true }) {
            for index in byDigest[DigestKey(algorithm: algorithm, digest: digest)] ?? []
            where files[index].size == entry.size && digests[index].map({ FileHashing.matches(entry, $0) }) == true {
                if let file = open(index, size: entry.size) { return (file, display(index)) }
            }
        }
        var spent = 0
        let entryPath = Array(entry.path.utf8)
        let named = byName[NameKey(size: entry.size, name: SeedBudget.lastComponent(of: entryPath))] ?? []
        let exact = named.filter { files[$0].path == entryPath }
        for index in exact + named.filter({ files[$0].path != entryPath }) where !isHashed(index, for: entry) {
            guard budget.allowsHash(after: spent) else { return nil }
            spent += 1
            if let found = tryHash(index, for: entry) { return found }
        }
        let sameSize = bySize[entry.size] ?? []
        var cursor = nextOther[entry.size] ?? 0
        defer { nextOther[entry.size] = cursor }
        while cursor < sameSize.count && budget.allowsHash(after: spent) {
            let index = sameSize[cursor]
            cursor += 1
            if digests[index] != nil { continue }  // compared above, from memory
            spent += 1
            if let found = tryHash(index, for: entry) { return found }
        }
        return nil
    }

    /// The regular file at `path` beneath a seed folder (an older version of an entry, for a chunk
    /// delta), with its size; nil when no seed holds one there, or only through a link.
    func olderCopy(at path: String) -> (file: FileDescriptor, size: Int64, display: String)? {
        let relative = Array(path.utf8)
        for folder in folders.indices {
            guard let file = open(File(folder: folder, path: relative, size: -1)) else { continue }
            if let st = try? file.stat(), st.size > 0 { return (file, st.size, file.displayPath) }
            file.close()
        }
        return nil
    }

    private func isHashed(_ index: Int, for entry: ManifestEntry) -> Bool {
        guard let known = digests[index] else { return false }
        return entry.digests.allSatisfy { known[$0.algorithm] != nil }
    }

    /// Hashes the file `index` for `entry` (remembering its digests) and returns it when they match.
    private func tryHash(_ index: Int, for entry: ManifestEntry) -> (file: FileDescriptor, display: String)? {
        guard let file = open(index, size: entry.size) else { return nil }
        hashes += 1
        guard let computed = try? FileHashing.digests(of: file, for: entry) else {
            file.close()
            return nil
        }
        var known = digests[index] ?? DigestSet()
        for (algorithm, digest) in computed {
            known[algorithm] = digest
            byDigest[DigestKey(algorithm: algorithm, digest: digest), default: []].append(index)
        }
        digests[index] = known
        if FileHashing.matches(entry, computed) { return (file, display(index)) }
        file.close()
        return nil
    }

    /// The file `index`, opened beneath its seed folder, when it is still a regular file of `size`.
    private func open(_ index: Int, size: Int64) -> FileDescriptor? {
        guard let file = open(files[index]) else { return nil }
        if let st = try? file.stat(), st.size == size { return file }
        file.close()
        return nil
    }

    /// `file` opened for reading beneath its folder, never through a link, without blocking on a
    /// FIFO; nil unless it is a regular file.
    private func open(_ file: File) -> FileDescriptor? {
        let fd = SafePath.open(bytes: file.path, beneath: folders[file.folder].fd, flags: O_RDONLY | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        let opened = FileDescriptor(fd: fd, displayPath: display(file))
        guard let st = try? opened.stat(), st.isRegularFile else {
            opened.close()
            return nil
        }
        return opened
    }

    private func display(_ index: Int) -> String { display(files[index]) }

    private func display(_ file: File) -> String {
        folders[file.folder].displayPath + (folders[file.folder].displayPath.hasSuffix("/") ? "" : "/")
            + String(decoding: file.path, as: UTF8.self)
    }

    private func walkOnce() {
        guard !walked else { return }
        walked = true
        for folder in folders.indices { files += SeedFolders.regularFiles(in: folders[folder], folder: folder) }
        files.sort { $0.folder != $1.folder ? $0.folder < $1.folder : $0.path.lexicographicallyPrecedes($1.path) }
        for (index, file) in files.enumerated() {
            bySize[file.size, default: []].append(index)
            byName[NameKey(size: file.size, name: SeedBudget.lastComponent(of: file.path)), default: []].append(index)
        }
        CrashPoint.hit("seed-after-walk")
    }

    /// Every regular file beneath `root`, no link followed, `.mirror` folders left out. A folder
    /// this user may not open is left out; a walk that fails (a folder moved while walked) keeps
    /// what it found: a seed only offers files, and missing one costs a download.
    static func regularFiles(in root: FileDescriptor, folder: Int) -> [File] {
        var out: [File] = []
        let state = Array(Destination.stateFolderName.utf8)
        guard let walker = try? FolderWalker(root, skippingTopLevel: state, skippingUnreadable: true) else { return out }
        // How deep the walk is inside a `.mirror` folder (0: not in one).
        var inState = 0
        while let event = try? walker.next() {
            switch event {
            case .enter(let name):
                if inState > 0 || name == state { inState += 1 }
            case .leave:
                if inState > 0 { inState -= 1 }
            case .entry(let name, let status):
                if inState == 0 && status.isRegularFile { out.append(File(folder: folder, path: walker.path(of: name), size: status.size)) }
            }
        }
        return out
    }
}
