import MirrorFS
import MirrorState

/// The other destinations inside a DEST, which `--delete-unlisted` leaves whole (docs/cli.md,
/// "Deleting"): a folder holding a `.mirror` state folder is a DEST of its own (or the generation
/// store of one, `NAME.generations`, whose DEST is then the symlink `NAME` beside it). Deleting in
/// it would remove another run's lock and journal while that run holds them, and a second run of
/// that DEST could then start beside the first. Paths are bytes, relative to the outer DEST.
struct NestedDestinations {
    /// The folders that are another destination or store, and the symlinks of atomic ones.
    private(set) var roots: Set<PathKey> = []

    /// Finds them in a walk of the outer DEST (its own `.mirror` skipped).
    init(_ tree: Destination.Tree) {
        let state = Array(Destination.stateFolderName.utf8)
        let suffix = Array(GenerationStore.suffix.utf8)
        for folder in tree.folders where folder.name == state {
            guard let parent = folder.parent else { continue }
            let owner = tree.path(ofFolder: parent)
            roots.insert(PathKey(bytes: owner))
            if owner.count > suffix.count, owner.suffix(suffix.count).elementsEqual(suffix) {
                roots.insert(PathKey(bytes: Array(owner.dropLast(suffix.count))))
            }
        }
    }

    var isEmpty: Bool { roots.isEmpty }

    /// Whether `path` is one of them or lies inside one.
    func contains(_ path: [UInt8]) -> Bool {
        NestedDestinations.contains(path, in: roots)
    }

    static func contains(_ path: [UInt8], in roots: Set<PathKey>) -> Bool {
        guard !roots.isEmpty else { return false }
        if roots.contains(PathKey(bytes: path)) { return true }
        var prefix = path
        while let slash = prefix.lastIndex(of: UInt8(ascii: "/")) {
            prefix.removeSubrange(slash...)
            if roots.contains(PathKey(bytes: prefix)) { return true }
        }
        return false
    }
}
