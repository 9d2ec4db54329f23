import MirrorFS
#if canImport(Glibc)
import Glibc
#endif

/// Removes partial files that no entry of the current run owns (D9 in docs/faults.md): an entry
/// that left the manifest, or changed its path, would otherwise leave its bytes in
/// `DEST/.mirror/partial/` for ever. Only names of mirror's own shape (``PartialFile/name(for:)``:
/// 32 hex digits and `.part`) are touched, with `unlinkat` (never following a link).
enum PartialSweep {
    /// - Parameter keeping: partial file names of the entries this run may still resume; asked
    ///   for only when the folder holds a partial file at all (it hashes every task's path, and
    ///   the folder is empty after most runs).
    /// - Returns: how many files were removed.
    @discardableResult
    static func removeOrphans(in folder: FileDescriptor, keeping: () -> Set<String>) -> Int {
        let names = ((try? folder.entryNames()) ?? []).filter(isPartialName).map { String(decoding: $0, as: UTF8.self) }
        guard !names.isEmpty else { return 0 }
        let kept = keeping()
        var removed = 0
        for name in names where !kept.contains(name) && DiskChange.unlinkat(folder.fd, name, 0) == 0 { removed += 1 }
        return removed
    }

    /// `<32 lower-case hex digits>.part`.
    static func isPartialName(_ name: [UInt8]) -> Bool {
        guard name.count == 37, name[32...].elementsEqual(".part".utf8) else { return false }
        return name[..<32].allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }
}
