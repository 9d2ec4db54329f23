import CZlib
import MirrorFS
import MirrorModel
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reading a `verified` line straight into the journal's ``VerifiedIndex``: opening the journal of
/// a destination of 10^6 files reads 10^6 of them, so the values are found as ranges of the
/// buffer and numbers parsed from the bytes, with no String and no array per line. What a line
/// means is exactly what ``JournalRecord/decode(_:)`` makes of it (`JournalDigestFormatTests`
/// and `JournalTests` compare the two).
extension JournalRecord {
    enum VerifiedLineScan {
        /// A `verified` record with a good checksum.
        case verified(VerifiedLine)
        /// A `verified` record whose checksum fails: the torn or damaged tail starts here.
        case corrupt
        /// Another kind of record, or a verified one not written the usual way (`path` not
        /// first): ``decode(_:)`` it.
        case other
    }

    /// The values of one `verified` line, as ranges of the buffer it was read from.
    struct VerifiedLine {
        /// The path as the line spells it (percent-encoded).
        var path: Range<Int>
        var size: Int64?, inode: Int64?, device: Int64?, found: Int64?
        var mtime: FileTime?, ctime: FileTime?
        var digests = PerAlgorithm<Range<Int>>()
        /// Every field is `key=value`; otherwise ``decode(_:)`` refuses the whole line.
        var wellFormed = true

        /// Whether ``decode(_:)`` would make a record of it (the path's decoding is checked apart).
        var isComplete: Bool {
            wellFormed && size != nil && inode != nil && device != nil && mtime != nil && ctime != nil && !digests.isEmpty
        }
    }

    /// Checks the CRC of the line `[start, newline)` of `buf` and, for a `verified` line, finds
    /// its values.
    static func scanVerifiedLine(_ buf: UnsafeBufferPointer<UInt8>, from start: Int, to newline: Int) -> VerifiedLineScan {
        let prefix = verifiedPrefix
        guard let base = buf.baseAddress, newline - start > 9 + prefix.count, buf[start + 8] == 0x20,
              memcmp(base + start + 8, prefix, prefix.count) == 0 else { return .other }
        let bodyStart = start + 9
        guard let crc = parseHex32(UnsafeBufferPointer(rebasing: buf[start..<start + 8])),
              UInt32(truncatingIfNeeded: crc32(0, base + bodyStart, UInt32(newline - bodyStart))) == crc else { return .corrupt }
        var line = VerifiedLine(path: 0..<0)
        // As decode: each field starts after one space and runs to the next space or the end.
        var i = start + 8 + prefix.count - 6  // the space before `path=`
        // memchr rather than a loop per byte: 10^6 lines of ~200 bytes are read at every start.
        func find(_ byte: Int32, from: Int, to: Int) -> Int {
            guard from < to, let hit = memchr(base + from, byte, to - from) else { return to }
            return UnsafeRawPointer(base).distance(to: UnsafeRawPointer(hit))
        }
        while i < newline {
            i += 1
            let fieldEnd = find(0x20, from: i, to: newline)
            let eq = find(0x3d, from: i, to: fieldEnd)
            guard eq < fieldEnd else {
                line.wellFormed = false
                i = fieldEnd
                continue
            }
            let key = UnsafeBufferPointer(rebasing: buf[i..<eq])
            let value = (eq + 1)..<fieldEnd
            func isKey(_ s: StaticString) -> Bool {
                s.utf8CodeUnitCount == key.count && memcmp(s.utf8Start, base + i, key.count) == 0
            }
            if isKey("path") { line.path = value }
            else if isKey("size") { line.size = number(buf, value) }
            else if isKey("ino") { line.inode = number(buf, value) }
            else if isKey("dev") { line.device = number(buf, value) }
            else if isKey("mtime") { line.mtime = time(buf, value) }
            else if isKey("ctime") { line.ctime = time(buf, value) }
            else if isKey("found") { line.found = number(buf, value) }
            else if let algorithm = DigestAlgorithm.journal(key: key) { line.digests[algorithm] = value }
            i = fieldEnd
        }
        return .verified(line)
    }

    /// A non-negative decimal number of at most 20 digits, read as its bit pattern (as
    /// ``decode(_:)`` reads inode and device numbers).
    private static func number(_ buf: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int64? {
        JournalRecord.decimal(buf[range])
    }

    /// `SECONDS.NANOSECONDS`, nine fraction digits.
    private static func time(_ buf: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> FileTime? {
        guard let dot = range.first(where: { buf[$0] == 0x2e }), range.upperBound - dot == 10,
              let s = number(buf, range.lowerBound..<dot), let ns = number(buf, (dot + 1)..<range.upperBound) else { return nil }
        return FileTime(seconds: s, nanoseconds: ns)
    }
}
