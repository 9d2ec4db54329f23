#if canImport(Glibc)
import Glibc
#endif

/// A record replaced by a later one of its path, or ended by a removal, stays in the arena: the
/// arena only grows while a journal is read. A journal of 10^6 files that has not been compacted
/// for a while holds several records per path (five million lines, 985 MB, for the compaction
/// measured in docs/performance.md), and reading it kept them all: 800 MB, most of them dead.
/// When the dead bytes are over half the arena, the live records are moved down in place, in
/// their order, and their slots follow them: no second arena, and the copying stays in
/// proportion to what was appended, since the next repack waits for as many dead bytes again.
extension VerifiedIndex {
    /// Dead bytes below this are not worth a pass over the records.
    static let repackFloor = 16 << 20

    mutating func repackIfWasteful() {
        guard deadBytes >= VerifiedIndex.repackFloor, deadBytes * 2 > arena.count else { return }
        repack()
    }

    /// Moves every live record down over the dead ones, in arena order. A record is live when its
    /// path's slot points at it. Records ahead of the one being read are untouched, and those
    /// behind it are at their new places with their slots updated, so every lookup on the way
    /// finds valid records.
    mutating func repack() {
        let end = arena.count
        var read = 0, write = 0
        while read < end {
            let (length, slot) = withRecord(at: read) { at -> (Int, Int?) in
                (VerifiedIndex.recordLength(at), find(RecordView(base: at).path))
            }
            if let slot, VerifiedIndex.recordOffset(slots[slot]) == read {
                if write != read {
                    arena.withUnsafeMutableBytes { raw in
                        guard let base = raw.baseAddress else { return }
                        memmove(base + write, base + read, length)
                    }
                    slots[slot] = slots[slot] & ~VerifiedIndex.offsetMask | UInt64(write + 2)
                }
                write += length
            }
            read += length
        }
        arena.removeLast(end - write)
        deadBytes = 0
        repacks += 1
    }

    /// Calls `body` with the arena offset of every latest record, in arena order: the order their
    /// lines were read or appended. Compaction writes them in it, so a journal that follows the
    /// manifest (a first sync installs in manifest order) keeps following it, and a later run's
    /// lookups, which come in manifest order, walk the arena forwards instead of at random: at
    /// 10^6 entries a dry run took 0.2 s longer over a journal in hash order (docs/performance.md,
    /// "A compacted journal keeps its order").
    func forEachLiveInArenaOrder(_ body: (Int) throws -> Void) rethrows {
        // Records are at least `Layout.headSize` (45) bytes apart, so offset / 32 tells their starts
        // apart: one bit for each 32 bytes of arena (400 KB for a 100 MB arena). A smaller
        // record layout would let two starts share a bit and keep a dead record: refuse to run.
        precondition(Layout.headSize >= 32, "records closer than 32 bytes share a bit of the live map")
        var live = [UInt64](repeating: 0, count: arena.count >> 11 + 1)
        for offset in liveOffsets {
            live[offset >> 11] |= 1 << UInt64((offset >> 5) & 63)
        }
        var offset = 0
        while offset < arena.count {
            let length = withRecord(at: offset, VerifiedIndex.recordLength)
            if live[offset >> 11] & (1 << UInt64((offset >> 5) & 63)) != 0 { try body(offset) }
            offset += length
        }
    }
}
