/// Whether a download gets a named partial file in `DEST/.mirror/partial/` or a file with no name
/// (`O_TMPFILE`) that is linked straight to its final path once verified (docs/performance.md,
/// "Small files without a name until verified").
///
/// Why: a named partial costs each file a create in the partial folder, then a rename across two
/// folders, under both folders' locks; with thousands of small files the thread creating the next
/// files and the thread renaming the verified ones wait on the partial folder's lock in turn. A
/// file with no name is created without touching any folder and named once, by `linkat(2)` into
/// its own folder: the directory work of `curl -o`, and still nothing at the final path until
/// every byte is verified.
///
/// What it costs: a file with no name cannot be resumed by a later run, since it disappears when
/// the run ends, by a kill or a power cut included. So only a new download of a small file
/// (``limit``) goes without a name: a kill then loses at most that much per file in flight. Within
/// the run, a retry still continues from the bytes the open file holds.
public struct PartialNaming: Equatable, Sendable {
    /// Largest file downloaded with no name: a kill loses at most this much of each.
    public static let limit: Int64 = 1 << 20

    /// Whether a file with no name can be made in the partial folder and given a name there:
    /// `O_TMPFILE`, then `linkat(2)` through `/proc/self/fd` (``PartialFile/canLinkUnnamedFiles(in:)``
    /// tries both once a run, so that a missing `/proc`, a filesystem without `O_TMPFILE` or a
    /// sandbox that refuses the link means named partial files, never a download that cannot be
    /// installed).
    public var canLinkOpenFiles: Bool

    public init(canLinkOpenFiles: Bool) {
        self.canLinkOpenFiles = canLinkOpenFiles
    }

    /// Whether a download of `size` bytes goes without a name; `resuming`: it continues bytes
    /// an earlier run left (those are in a named file already).
    public func unnamed(size: Int64, resuming: Bool) -> Bool {
        canLinkOpenFiles && !resuming && size <= PartialNaming.limit
    }
}
