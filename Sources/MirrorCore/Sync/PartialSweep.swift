#if canImport(Glibc)
import Glibc
#endif

/// Removes partial files that no entry of the current run owns (D9 in docs/faults.md): an entry
/// that left the manifest, or changed its path, would otherwise leave its bytes in
/// `DEST/.mirror/partial/` for ever. Only names of mirror's own shape (``PartialFile/name(for:)``:
/// 32 hex digits and `.part`) are touched, with `unlinkat` (never following a link).
enum PartialSweep {
    /// - Parameter keeping: partial file names of the entries this run may still resume.
    /// - Returns: how many files were removed.
    @discardableResult
    static func removeOrphans(in folder: FileDescriptor, keeping: Set<String>) -> Int {
        let fd = dup(folder.fd)
        guard fd >= 0, let dir = fdopendir(fd) else {
            if fd >= 0 { close(fd) }
            return 0
        }
        defer { closedir(dir) }
        rewinddir(dir)
        var doomed: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if isPartialName(name) && !keeping.contains(name) { doomed.append(name) }
        }
        var removed = 0
        for name in doomed where unlinkat(folder.fd, name, 0) == 0 { removed += 1 }
        return removed
    }

    /// `<32 lower-case hex digits>.part`.
    static func isPartialName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard bytes.count == 37, bytes[32...].elementsEqual(".part".utf8) else { return false }
        return bytes[..<32].allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }
}
