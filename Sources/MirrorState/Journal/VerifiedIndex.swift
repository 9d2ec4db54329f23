import MirrorFS
import MirrorModel
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The journal's latest verified record per path, packed: what the no-op path compares, and no
/// more, in one byte arena, found through one open-addressing table keyed by the path's bytes.
///
/// Why: a destination of 10^6 files has 10^6 verified lines of ~200 bytes. Keeping those lines
/// as read (and a `[UInt64: Int]` from path hash to line) held ~230 MB beside the manifest; a
/// packed record is 45 bytes plus its path and raw digests (~86 bytes for a short path and
/// SHA-256: ``Layout``), and the table 8 bytes per slot. Records are never Strings until asked for
/// (``record(at:)``), so the lookup of the no-op path allocates nothing.
///
/// Keys are the path's bytes, compared with `memcmp`: never Strings, whose `==` would merge two
/// spellings of one name (docs/journal.md: paths are bytes).
package struct VerifiedIndex {
    var arena: [UInt8] = []
    /// 0 empty, 1 removed, else tag (high 24 bits of the hash) << 40 | (arena offset + 2).
    /// Power-of-two size, at most half full (live and removed slots together).
    var slots: [UInt64] = Array(repeating: 0, count: 64)
    private var used = 0
    /// Bytes of the arena held by records a later one replaced or a removal ended
    /// (``repackIfWasteful()``).
    var deadBytes = 0
    /// How many times the arena was repacked: offsets taken before a repack are void after it.
    var repacks = 0
    private(set) var count = 0
    /// The records' devices, each kept once (``Layout``).
    var devices = DeviceTable()
    static let offsetMask: UInt64 = (1 << 40) - 1

    /// The arena offset a live slot points at (slots keep it plus 2, apart from 0 and 1).
    static func recordOffset(_ slot: UInt64) -> Int { Int(slot & offsetMask) - 2 }

    /// Room for `additional` more records of about `bytesEach` bytes beyond those held: a journal
    /// about to be read (guessed from its size), or a run about to install that many files. The
    /// arena grows once, rather than doubling as records come, each doubling a copy with the old
    /// arena still held (at 10^6 files, 64 and 128 MB at once). Reserved memory that is never
    /// written is never resident, so a generous guess costs address space only; but the table is
    /// written (zeroed) whole, so it is made for at most ``reservedSlotsCap`` slots, and grows past
    /// that by doubling. A guess from a journal's size counts every line as a path, and a journal
    /// not compacted for a while has several lines a path (985 MB for 10^6 paths: a table of
    /// 128 MB, where 32 MB hold them at a quarter full).
    mutating func reserve(additional: Int, bytesEach: Int) {
        guard additional > 0 else { return }
        arena.reserveCapacity(arena.count + additional * bytesEach)
        var size = slots.count
        while size < min((used + additional) * 2, VerifiedIndex.reservedSlotsCap) { size *= 2 }
        if size > slots.count { rehash(size) }
    }

    /// 4 Mi slots, 32 MB: 2 million paths at most half full.
    static let reservedSlotsCap = 1 << 22

    // MARK: - Writing

    /// Appends the packed record and makes it the path's latest. `digests` are the values as the
    /// line spells them (`percentEncoded`) or as a record holds them: lowercase hex of the right
    /// length is kept as raw bytes, anything else as text (and a value that does not
    /// percent-decode is dropped, as ``JournalRecord/decode(_:)`` drops it).
    mutating func insert(path: UnsafeBufferPointer<UInt8>, size: Int64, inode: UInt64, device: UInt64,
                         mtime: FileTime, ctime: FileTime, adopted: Bool,
                         digests: PerAlgorithm<UnsafeBufferPointer<UInt8>>, percentEncoded: Bool) {
        if insertUsual(path: path, size: size, inode: inode, device: device, mtime: mtime, ctime: ctime, adopted: adopted,
                       digests: digests) { return }
        // The record's length first (a digest kept as text, which is rare, is decoded here), then
        // the record written in one piece and appended with one copy: 10^6 lines are read so.
        var texts = PerAlgorithm<[UInt8]>()
        let deviceCode = devices.code(for: device)
        var length = Layout.headLength(pathCount: path.count, deviceCode: deviceCode)
        var kinds: UInt8 = 0
        for algorithm in DigestAlgorithm.allCases {
            guard let value = digests[algorithm] else { continue }
            if VerifiedIndex.isLowercaseHex(value, algorithm) {
                length += algorithm.byteCount
                kinds |= Layout.raw << Layout.shift(algorithm)
                continue
            }
            var text = Array(value)
            if percentEncoded {
                guard let decoded = JournalRecord.percentDecodeBytes(text[...]) else { continue }
                text = decoded
            }
            text = Array(text.prefix(Int(UInt16.max)))
            length += 2 + text.count
            texts[algorithm] = text
            kinds |= Layout.text << Layout.shift(algorithm)
        }
        withUnsafeTemporaryAllocation(byteCount: length, alignment: 8) { out in
            guard let p = out.baseAddress else { return }
            var i = Layout.writeHead(p, path: path, size: size, inode: inode, device: device, deviceCode: deviceCode,
                                     mtime: mtime, ctime: ctime, adopted: adopted, kinds: kinds)
            for algorithm in DigestAlgorithm.allCases {
                if let text = texts[algorithm] {
                    p.storeBytes(of: UInt16(text.count), toByteOffset: i, as: UInt16.self)
                    text.withUnsafeBytes { (p + i + 2).copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(p), byteCount: $0.count) }
                    i += 2 + text.count
                } else if let hex = digests[algorithm], VerifiedIndex.isLowercaseHex(hex, algorithm) {
                    if let h = hex.baseAddress {
                        for k in 0 ..< algorithm.byteCount {
                            let byte = VerifiedIndex.nibble(h[k &* 2]) << 4 | VerifiedIndex.nibble(h[k &* 2 &+ 1])
                            p.storeBytes(of: byte, toByteOffset: i &+ k, as: UInt8.self)
                        }
                    }
                    i += algorithm.byteCount
                }
            }
            let offset = arena.count
            arena.append(contentsOf: UnsafeRawBufferPointer(start: p, count: length))
            place(path: path, offset: offset)
        }
    }

    /// Whether `hex` is lowercase hex of the algorithm's length, as the journal writes digests.
    /// The usual line, every digest lowercase hex of its algorithm's length: each is decoded
    /// straight into the record, in one pass over its digits. False, with nothing changed, for
    /// any other line (``insert(path:size:inode:device:mtime:ctime:adopted:digests:percentEncoded:)``
    /// then takes the long way).
    private mutating func insertUsual(path: UnsafeBufferPointer<UInt8>, size: Int64, inode: UInt64, device: UInt64,
                                      mtime: FileTime, ctime: FileTime, adopted: Bool,
                                      digests: PerAlgorithm<UnsafeBufferPointer<UInt8>>) -> Bool {
        let deviceCode = devices.code(for: device)
        var length = Layout.headLength(pathCount: path.count, deviceCode: deviceCode)
        var kinds: UInt8 = 0
        for algorithm in DigestAlgorithm.allCases {
            if let value = digests[algorithm] {
                guard value.count == 2 * algorithm.byteCount else { return false }
                length += algorithm.byteCount
                kinds |= Layout.raw << Layout.shift(algorithm)
            }
        }
        return withUnsafeTemporaryAllocation(byteCount: length, alignment: 8) { out -> Bool in
            guard let p = out.baseAddress else { return false }
            var i = Layout.writeHead(p, path: path, size: size, inode: inode, device: device, deviceCode: deviceCode,
                                     mtime: mtime, ctime: ctime, adopted: adopted, kinds: kinds)
            var invalid: UInt8 = 0
            for algorithm in DigestAlgorithm.allCases {
                guard let h = digests[algorithm]?.baseAddress else { continue }
                for k in 0 ..< algorithm.byteCount {
                    let high = VerifiedIndex.nibble(h[k &* 2]), low = VerifiedIndex.nibble(h[k &* 2 &+ 1])
                    invalid |= high | low
                    p.storeBytes(of: high << 4 | low & 0x0f, toByteOffset: i &+ k, as: UInt8.self)
                }
                i += algorithm.byteCount
            }
            guard invalid & 0xf0 == 0 else { return false }
            let offset = arena.count
            arena.append(contentsOf: UnsafeRawBufferPointer(start: p, count: length))
            place(path: path, offset: offset)
            return true
        }
    }

    /// Whether `hex` is lowercase hex of the algorithm's length, as the journal writes digests
    /// (the long way only: ``insertUsual`` checks while it decodes).
    private static func isLowercaseHex(_ hex: UnsafeBufferPointer<UInt8>, _ algorithm: DigestAlgorithm) -> Bool {
        guard hex.count == algorithm.byteCount * 2 else { return false }
        return hex.allSatisfy { nibble($0) < 16 }
    }

    /// The value of a lowercase hex digit; 0xff for any other byte.
    @inline(__always)
    private static func nibble(_ c: UInt8) -> UInt8 {
        let digit = c &- 48, letter = c &- 97
        return digit < 10 ? digit : letter < 6 ? letter &+ 10 : 0xff
    }

    mutating func insert(_ r: VerifiedRecord) {
        // The digests' text side by side in one array, so each can be lent as a buffer.
        var joined: [UInt8] = []
        var ranges = PerAlgorithm<Range<Int>>()
        for (algorithm, text) in r.identity.digests {
            let start = joined.count
            joined += text.utf8
            ranges[algorithm] = start..<joined.count
        }
        var path = r.identity.path
        joined.withUnsafeBufferPointer { all in
            let digests = ranges.mapValues { UnsafeBufferPointer(rebasing: all[$0]) }
            path.withUTF8 { bytes in
                insert(path: bytes, size: r.identity.size, inode: r.inode, device: r.device, mtime: r.mtime, ctime: r.ctime,
                       adopted: r.adopted, digests: digests, percentEncoded: false)
            }
        }
    }

    /// Forgets the path's record (a no-op when there is none).
    mutating func remove(path: UnsafeBufferPointer<UInt8>) {
        guard let slot = find(path) else { return }
        deadBytes += withRecord(at: VerifiedIndex.recordOffset(slots[slot]), VerifiedIndex.recordLength)
        slots[slot] = 1
        count -= 1
    }

    // MARK: - Reading

    /// True when the path's latest record describes exactly this entry (size, the same set of
    /// digests, equal byte for byte) and this file (`status`: a regular file with the record's
    /// size, inode, device and mtime, and its ctime unless `movedChangeTime` allows a moved one:
    /// ``ChangeTimeTrust``): the no-op path, without allocating.
    func matches(path: UnsafeBufferPointer<UInt8>, size: Int64, digests: DigestSet, status: FileStatus,
                 movedChangeTime: Bool) -> Bool {
        guard status.isRegularFile, status.size == size, let slot = find(path) else { return false }
        let offset = VerifiedIndex.recordOffset(slots[slot])
        return withRecord(at: offset) { at -> Bool in
            guard at.loadUnaligned(fromByteOffset: Layout.inode, as: UInt64.self) == status.inode,
                  Layout.device(at, in: devices) == status.device,
                  Layout.mtime(at) == status.mtime,
                  movedChangeTime || Layout.ctime(at) == status.ctime
            else { return false }
            return VerifiedIndex.holds(at, size: size, digests: digests)
        }
    }

    /// The path's latest record, decoded (a String per value: not for the no-op path).
    func record(for path: UnsafeBufferPointer<UInt8>) -> VerifiedRecord? {
        find(path).map { record(at: VerifiedIndex.recordOffset(slots[$0])) }
    }

    /// Every latest record, decoded, in no particular order.
    func forEach(_ body: (VerifiedRecord) -> Void) {
        for offset in liveOffsets { body(record(at: offset)) }
    }

    /// The arena offset of every latest record (the live slots), in no particular order.
    var liveOffsets: some Sequence<Int> {
        slots.lazy.filter { $0 > 1 }.map { VerifiedIndex.recordOffset($0) }
    }

    func record(at offset: Int) -> VerifiedRecord {
        withRecord(at: offset) { at -> VerifiedRecord in
            let path = String(decoding: Layout.path(at), as: UTF8.self)
            var digests = PerAlgorithm<String>()
            VerifiedIndex.digestFields(at) { algorithm, field in
                switch field {
                case .absent: break
                case .raw(let value): digests[algorithm] = Digest(bytes: Array(value)).hex
                case .text(let value): digests[algorithm] = String(decoding: value, as: UTF8.self)
                }
                return true
            }
            let identity = EntryIdentity(path: path, size: at.loadUnaligned(fromByteOffset: Layout.size, as: Int64.self),
                                         digests: digests)
            return VerifiedRecord(identity: identity, inode: at.loadUnaligned(fromByteOffset: Layout.inode, as: UInt64.self),
                                  device: Layout.device(at, in: devices), mtime: Layout.mtime(at), ctime: Layout.ctime(at),
                                  adopted: Layout.flags(at) & Layout.adopted != 0)
        }
    }

    // MARK: - The table

    /// SipHash with the process's random seed (`Swift.Hasher`), as ``PathIndex``: paths come from
    /// manifests, and a crafted set of colliding paths must not make every lookup a long probe.
    private static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var hasher = Swift.Hasher()
        hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
        return UInt64(UInt(bitPattern: hasher.finalize()))
    }

    private static func tag(_ hash: UInt64) -> UInt64 { hash >> 40 }

    private func pathEquals(_ path: UnsafeBufferPointer<UInt8>, at offset: Int) -> Bool {
        withRecord(at: offset) { at -> Bool in
            let held = Layout.path(at)
            guard held.count == path.count else { return false }
            guard let base = path.baseAddress, let start = held.baseAddress, path.count > 0 else { return true }
            return memcmp(start, base, path.count) == 0
        }
    }

    /// The slot holding `path`'s record.
    func find(_ path: UnsafeBufferPointer<UInt8>) -> Int? {
        let h = VerifiedIndex.hash(path)
        let mask = slots.count - 1
        var i = Int(truncatingIfNeeded: h) & mask
        let tag = VerifiedIndex.tag(h)
        return slots.withUnsafeBufferPointer { table -> Int? in
            while true {
                let slot = table[i]
                if slot == 0 { return nil }
                if slot > 1, slot >> 40 == tag, pathEquals(path, at: VerifiedIndex.recordOffset(slot)) { return i }
                i = (i + 1) & mask
            }
        }
    }

    /// Points `path`'s slot at the record at `offset`, replacing an earlier record of the path:
    /// one hash and one probe sequence.
    private mutating func place(path: UnsafeBufferPointer<UInt8>, offset: Int) {
        if (used + 1) * 2 > slots.count { rehash(count * 4 > slots.count ? slots.count * 2 : slots.count) }
        let h = VerifiedIndex.hash(path)
        let mask = slots.count - 1
        let tag = VerifiedIndex.tag(h)
        var i = Int(truncatingIfNeeded: h) & mask
        var free: Int?
        while true {
            let slot = slots[i]
            if slot == 0 { break }
            if slot == 1 {
                if free == nil { free = i }
            } else if slot >> 40 == tag, pathEquals(path, at: VerifiedIndex.recordOffset(slot)) {
                deadBytes += withRecord(at: VerifiedIndex.recordOffset(slot), VerifiedIndex.recordLength)
                slots[i] = tag << 40 | UInt64(offset + 2)
                repackIfWasteful()
                return
            }
            i = (i + 1) & mask
        }
        if let free { i = free } else { used += 1 }
        slots[i] = tag << 40 | UInt64(offset + 2)
        count += 1
        repackIfWasteful()  // after removals
    }

    /// A fresh table of `size` slots holding the live records (dropping removed slots).
    private mutating func rehash(_ size: Int) {
        let old = slots
        slots = Array(repeating: 0, count: size)
        used = 0
        let mask = size - 1
        for slot in old where slot > 1 {
            let offset = VerifiedIndex.recordOffset(slot)
            let h = withRecord(at: offset) { VerifiedIndex.hash(RecordView(base: $0).path) }
            var i = Int(truncatingIfNeeded: h) & mask
            while slots[i] != 0 { i = (i + 1) & mask }
            slots[i] = slot
            used += 1
        }
    }

    func withRecord<T>(at offset: Int, _ body: (UnsafeRawPointer) -> T) -> T {
        arena.withUnsafeBytes { raw in
            // A slot points into the arena only once a record was appended there.
            guard let base = raw.baseAddress else { preconditionFailure("a slot points into an empty arena") }
            return body(base + offset)
        }
    }
}
