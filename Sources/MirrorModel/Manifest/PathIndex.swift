#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Every path seen so far, to enforce the spec's "no two entries have the same path, and no entry's
/// path is a folder of another's" with one hash lookup per new path and per new folder, so that
/// 10^6 entries cost O(total path length).
///
/// A small open-addressing table over the paths' own bytes rather than `[String: Int]`: keys are
/// the bytes of paths and of their folders (prefixes), which would otherwise each need a String
/// allocation, and Swift's String hashing normalises Unicode first. Hashing still goes through
/// `Hasher` (SipHash, randomly seeded per process), so a crafted manifest cannot force collisions.
package struct PathIndex: Sendable {
    /// 16 bytes: 10^6 entries make 10^6 + (folders) keys. The hash is not kept (the slot holds
    /// its high bits, and a rehash computes it again from the bytes). A key's bytes are the first
    /// `count` bytes of an inserted path, where that path's bytes are (a folder: of the first file
    /// listed under it), so the index copies no path and keeps no list of them, only the blocks
    /// they are in (docs/performance.md, "Paths in the arena").
    private struct Key {
        var block: UInt32       // in `blocks`
        var offset: UInt32      // in that block
        var count: UInt32
        /// A file: its line (≥ 0). A folder: -1 - the key of the first file listed under it
        /// (whose line the messages name).
        var lineOrFirstFile: Int32

        var isFile: Bool { lineOrFirstFile >= 0 }
        var line: Int32 { lineOrFirstFile }
        var firstFile: Int { Int(-1 - lineOrFirstFile) }
    }

    /// The blocks that hold the inserted paths, each once (a manifest's paths come from one
    /// ``ByteArena``, block after block).
    /// ``SharedBlock``s, so that a finished index is `Sendable`: asked from several threads
    /// (an atomic run's seeding), it only reads.
    private var blocks: [SharedBlock] = []
    /// Where the path being inserted is: its block in `blocks` and its offset there.
    private var current: (block: UInt32, offset: UInt32) = (0, 0)
    private var keys: [Key] = []
    /// 0 for an empty slot, else (high 32 bits of the key's hash) << 32 | (key index + 1): probing
    /// compares hashes in the table itself and touches `keys` only on a probable match.
    /// Power-of-two size, at most three quarters full: linear probing then needs about 2.5 slots
    /// for a key that is there and 8.5 for one that is not, all but the first in the same few
    /// cache lines, and 10^6 paths take 2^21 slots (16 MB) instead of 2^22.
    private var slots: [UInt64] = Array(repeating: 0, count: 64)

    /// Room for `count` paths and as many folders. The table is written in full when made
    /// (resident at once), so `count` should not be a generous guess; the arrays are only reserved.
    mutating func reserve(_ count: Int) {
        keys.reserveCapacity(count * 2)
        var size = slots.count
        while !PathIndex.fits(count, in: size) { size *= 2 }
        if size > slots.count { rehash(size) }
    }

    private static func fits(_ keys: Int, in slots: Int) -> Bool { keys * 4 <= slots * 3 }

    /// Records `path`; returns a message when it repeats or clashes with an earlier path.
    mutating func insert(_ path: String, line: Int) -> String? {
        insert(ManifestPath(path), line: line)
    }

    /// Records `path` (kept, not copied); returns a message when it repeats or clashes with an
    /// earlier path.
    mutating func insert(_ path: ManifestPath, line: Int) -> String? {
        path.withBytes { insert(bytes: $0, path: path, line: line) }
    }

    private mutating func insert(bytes: UnsafeBufferPointer<UInt8>, path: ManifestPath, line: Int) -> String? {
        // Keys and paths are counted in 32 bits; each path adds itself and at most one key per folder.
        guard keys.count < Int(Int32.max) - bytes.count - 1 else {
            return "too many paths and folders (line \(line)); split the manifest"
        }
        let h = PathIndex.hash(bytes)
        if let k = find(bytes, hash: h) {
            let key = keys[k]
            if key.isFile { return "duplicate path \(quoted(path.string)): first listed on line \(key.line)" }
            let file = keys[key.firstFile]
            return "path \(quoted(path.string)) (line \(line)) is a folder of \(quoted(text(file))) (line \(file.line)); a path cannot be both a file and a folder"
        }
        let place = path.place
        if blocks.last?.block !== place.block { blocks.append(SharedBlock(place.block)) }
        current = (UInt32(truncatingIfNeeded: blocks.count - 1), place.offset)
        let fileKey = add(bytes, hash: h, lineOrFirstFile: Int32(clamping: max(0, line)))
        // Folders from the longest prefix down. Once a prefix is already known, so are all shorter
        // ones, and they were checked against the files when they were added.
        var end = bytes.count
        while let slash = bytes[..<end].lastIndex(of: UInt8(ascii: "/")) {
            let folder = UnsafeBufferPointer(rebasing: bytes[..<slash])
            let isParent = end == bytes.count
            if isParent && isLastParent(folder) { break }
            let hf = PathIndex.hash(folder)
            if let k = find(folder, hash: hf) {
                let key = keys[k]
                if !key.isFile {
                    if isParent { lastParent = k }
                    break
                }
                return "path \(quoted(path.string)) (line \(line)) is inside \(quoted(text(key))), which is listed as a file on line \(key.line); a path cannot be both a file and a folder"
            }
            let k = add(folder, hash: hf, lineOrFirstFile: Int32(truncatingIfNeeded: -1 - fileKey))
            if isParent { lastParent = k }
            end = slash
        }
        return nil
    }

    init() {}

    /// The paths of `entries` (a valid manifest's: no repeats, no path a folder of another) and
    /// their folders, pointing into the entries' own bytes: what deleting and the building of a
    /// generation ask "is it listed?" of, for 16 bytes a key where a `Set` of `[UInt8]` took ~75.
    package init(listing entries: [ManifestEntry]) {
        reserve(entries.count)
        for (i, entry) in entries.enumerated() { _ = insert(entry.pathBytes, line: i) }
    }

    /// Whether a listed entry has exactly this path.
    package func containsFile(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool { entryIndex(bytes) != nil }

    /// For an index made ``init(listing:)``: the position in its entries of the entry with exactly
    /// this path (for one made while a manifest is read, its line).
    package func entryIndex(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        find(bytes, hash: PathIndex.hash(bytes)).flatMap { keys[$0].isFile ? Int(keys[$0].line) : nil }
    }

    /// Whether some listed entry lies in this folder (at any depth).
    func containsFolder(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        find(bytes, hash: PathIndex.hash(bytes)).map { !keys[$0].isFile } ?? false
    }

    package func containsFile(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBufferPointer { containsFile($0) } }
    package func containsFolder(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBufferPointer { containsFolder($0) } }

    /// The key of the folder of the path inserted last, a folder by then: a sorted manifest lists
    /// a folder's files one after another, and they need no hash and no lookup for it (a folder
    /// stays one: a later file at its path is found as a folder when it is inserted).
    private var lastParent = -1

    private func isLastParent(_ folder: UnsafeBufferPointer<UInt8>) -> Bool {
        guard lastParent >= 0 else { return false }
        return matches(keys[lastParent], folder)
    }

    /// Whether `key`'s bytes are `bytes`.
    @inline(__always)
    private func matches(_ key: Key, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard Int(key.count) == bytes.count else { return false }
        guard let b = bytes.baseAddress, key.count > 0 else { return true }
        return withBytes(key) { a in a.baseAddress.map { memcmp($0, b, bytes.count) == 0 } ?? false }
    }

    @inline(__always)
    private func withBytes<R>(_ key: Key, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        blocks[Int(key.block)].block.withBytes(at: key.offset, count: key.count, body)
    }

    private func text(_ key: Key) -> String {
        withBytes(key) { String(decoding: $0, as: UTF8.self) }
    }

    private static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var hasher = Swift.Hasher()  // not MirrorModel.Hasher (the SHA one)
        hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
        return hasher.finalize()
    }

    private func find(_ bytes: UnsafeBufferPointer<UInt8>, hash h: Int) -> Int? {
        let mask = slots.count - 1
        var i = h & mask
        let tag = PathIndex.tag(h)
        while true {
            let slot = slots[i]
            if slot == 0 { return nil }
            if slot >> 32 == tag {
                let k = Int(slot & 0xffff_ffff) - 1
                if matches(keys[k], bytes) { return k }
            }
            i = (i + 1) & mask
        }
    }

    /// Adds a key known to be absent, for the first `bytes.count` bytes of the path being
    /// inserted; returns its index.
    private mutating func add(_ bytes: UnsafeBufferPointer<UInt8>, hash h: Int, lineOrFirstFile: Int32) -> Int {
        if !PathIndex.fits(keys.count + 1, in: slots.count) { rehash(slots.count * 2) }
        keys.append(Key(block: current.block, offset: current.offset, count: UInt32(truncatingIfNeeded: bytes.count),
                        lineOrFirstFile: lineOrFirstFile))
        place(keys.count - 1, hash: h)
        return keys.count - 1
    }

    private mutating func place(_ k: Int, hash: Int) {
        let mask = slots.count - 1
        var i = hash & mask
        while slots[i] != 0 { i = (i + 1) & mask }
        slots[i] = PathIndex.tag(hash) << 32 | UInt64(k + 1)
    }

    private static func tag(_ hash: Int) -> UInt64 { UInt64(UInt(bitPattern: hash) >> 32) }

    private mutating func rehash(_ size: Int) {
        slots = Array(repeating: 0, count: size)
        for k in keys.indices {
            let h = withBytes(keys[k]) { PathIndex.hash($0) }
            place(k, hash: h)
        }
    }
}
