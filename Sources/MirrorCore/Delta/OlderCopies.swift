import MirrorFS
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// Where an older version of an entry may be on this machine, the base of a chunk delta
/// (docs/cli.md, "Chunk deltas", step 1), looked at in this order: a regular file at its path in
/// DEST (and in the current generation of an atomic DEST), under a `--seed` folder, else the
/// partial download of an earlier version (a run killed before the manifest changed again);
/// never through a link. Any of them is only a base: a chunk is copied from it only when its
/// bytes have the index's digest. The run and the dry run look in the same places.
struct OlderCopies {
    /// DEST, then the set an atomic DEST shows.
    let trees: [Destination]
    /// The `--seed` folders (``ContentIndex/seeds``).
    let seeds: SeedFolders?
    /// `DEST/.mirror/partial`, if there is one.
    let partialFolder: FileDescriptor?
    /// How a partial file's name is shown (``Destination/displayState(_:)``).
    let partialDisplay: (String) -> String

    /// An older copy of `entry`, opened; `partialName`: its partial file's name (``PartialFile/name(for:)``).
    func find(_ entry: ManifestEntry, partialName: String) -> DeltaPreparation.OlderCopy? {
        for tree in trees {
            guard let file = try? tree.openForReading(entry.path) else { continue }
            if let st = try? file.stat(), st.isRegularFile, st.size > 0 {
                return .init(file: file, size: st.size, display: tree.display(entry.path), place: .destination)
            }
            file.close()
        }
        // Beneath each seed folder's descriptor, never through a link (``SeedFolders``).
        if let seed = seeds?.olderCopy(at: entry.path) {
            return .init(file: seed.file, size: seed.size, display: seed.display, place: .seed)
        }
        guard let partialFolder else { return nil }
        let fd = SafePath.open(partialName, beneath: partialFolder.fd, flags: O_RDONLY)
        guard fd >= 0 else { return nil }
        let display = partialDisplay(partialName)
        let file = FileDescriptor(fd: fd, displayPath: display)
        // Read now, before a new partial file takes the name (the descriptor keeps the old bytes).
        if let st = try? file.stat(), st.isRegularFile, st.size > 0, st.owner == geteuid() {
            return .init(file: file, size: st.size, display: display, place: .partial)
        }
        file.close()
        return nil
    }
}
