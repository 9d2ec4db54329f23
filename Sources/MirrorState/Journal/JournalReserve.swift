import MirrorFS

import MirrorFS

/// Free space kept for the journal beyond its end (docs/journal.md, "A full disk").
///
/// When a download fills DEST's file system, the run still has to write what it learnt: the
/// durable bytes of each partial file and its own run record, which `mirror status` shows as the
/// reason the run stopped. On a full disk such an append fails unless the journal's last block
/// happens to have room, so the journal keeps ``size`` bytes allocated past its end
/// (`fallocate(2)` with `FALLOC_FL_KEEP_SIZE`, ``FileDescriptor/reserve(from:length:)``) and tops it
/// up whenever less than half is left. Appends into allocated blocks need no free space (ext4,
/// xfs, tmpfs); a copy-on-write file system (btrfs) allocates anew on every write, so there the
/// reserve helps little, and one without `fallocate` has none.
struct JournalReserve {
    /// Room for the run record and a few hundred partial records.
    static let size: Int64 = 64 << 10

    /// Where the allocated blocks end (0: none yet).
    private var end: Int64 = 0
    private var unsupported = false

    /// Tops the reserve up for a journal `length` bytes long, when less than half of it is left.
    /// Best effort: a failure (a full disk) is tried again at the next append.
    mutating func keep(_ file: FileDescriptor, length: Int64) {
        guard !unsupported, end - length < JournalReserve.size / 2 else { return }
        switch file.reserve(from: length, length: JournalReserve.size) {
        case .reserved: end = length + JournalReserve.size
        case .unsupported: unsupported = true
        case .failed: break
        }
    }

    /// A new file replaced the journal (compaction): its reserve is made anew.
    mutating func reset() { end = 0 }
}
