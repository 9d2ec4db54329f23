/// The other destinations inside a DEST, which `--delete-unlisted` leaves whole (docs/cli.md,
/// "Deleting"): a folder holding a `.mirror` state folder is a DEST of its own (or the generation
/// store of one, `NAME.generations`, whose DEST is then the symlink `NAME` beside it). Deleting in
/// it would remove another run's lock and journal while that run holds them, and a second run of
/// that DEST could then start beside the first. Paths are bytes, relative to the outer DEST.
struct NestedDestinations {
    /// The folders that are another destination or store, and the symlinks of atomic ones.
    private var roots: Set<[UInt8]> = []

    /// Finds them in the folders of a walk of the outer DEST (its own `.mirror` skipped).
    init(folders: [[UInt8]]) {
        let state = Array(Destination.stateFolderName.utf8)
        let suffix = Array(GenerationStore.suffix.utf8)
        for folder in folders {
            guard let slash = folder.lastIndex(of: UInt8(ascii: "/")), Array(folder[(slash + 1)...]) == state else { continue }
            let owner = Array(folder[..<slash])
            roots.insert(owner)
            if owner.count > suffix.count, owner.suffix(suffix.count).elementsEqual(suffix) {
                roots.insert(Array(owner.dropLast(suffix.count)))
            }
        }
    }

    var isEmpty: Bool { roots.isEmpty }

    /// Whether `path` is one of them or lies inside one.
    func contains(_ path: [UInt8]) -> Bool {
        guard !roots.isEmpty else { return false }
        if roots.contains(path) { return true }
        var prefix = path
        while let slash = prefix.lastIndex(of: UInt8(ascii: "/")) {
            prefix.removeSubrange(slash...)
            if roots.contains(prefix) { return true }
        }
        return false
    }
}
