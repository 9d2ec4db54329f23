#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Every path seen so far, to enforce the spec's "no two entries have the same path, and no entry's
/// path is a folder of another's" with one hash lookup per new path and per new folder, so that
/// 10^6 entries cost O(total path length).
///
/// A small open-addressing table over one byte buffer rather than `[String: Int]`: keys are the
/// bytes of paths and of their folders (prefixes), which would otherwise each need a String
/// allocation, and Swift's String hashing normalises Unicode first. Hashing still goes through
/// `Hasher` (SipHash, randomly seeded per process), so a crafted manifest cannot force collisions.
struct PathIndex {
    /// 16 bytes: 10^6 entries make 10^6 + (folders) keys. The hash is not kept (the slot holds
    /// its high bits, and a rehash computes it again from the bytes). 32-bit fields: `storage`
    /// holds each path once (and its folders' bytes once each), so it stays far under 4 GiB for
    /// any manifest the reader accepts, and lines are counted in 32 bits as libyaml counts them.
    private struct Key {
        var start: UInt32       // in `storage`
        var count: UInt32
        var line: Int32
        /// For a folder: the key of the first file listed under it; -1 for a file.
        var firstFile: Int32

        var isFile: Bool { firstFile < 0 }
        var range: Range<Int> { Int(start) ..< Int(start) + Int(count) }
    }

    private var storage: [UInt8] = []
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
        storage.reserveCapacity(count * 32)
        keys.reserveCapacity(count * 2)
        var size = slots.count
        while !PathIndex.fits(count, in: size) { size *= 2 }
        if size > slots.count { rehash(size) }
    }

    private static func fits(_ keys: Int, in slots: Int) -> Bool { keys * 4 <= slots * 3 }

    /// Records `path`; returns a message when it repeats or clashes with an earlier path.
    mutating func insert(_ path: String, line: Int) -> String? {
        var contiguous = path  // withUTF8 is mutating: it may make the string contiguous first
        return contiguous.withUTF8 { insert(bytes: $0, path: path, line: line) }
    }

    private mutating func insert(bytes: UnsafeBufferPointer<UInt8>, path: String, line: Int) -> String? {
        // The path and each of its folders (one per slash) add at most the path's length each.
        let components = 1 + bytes.reduce(0) { $0 + ($1 == UInt8(ascii: "/") ? 1 : 0) }
        guard storage.count + components * bytes.count < Int(UInt32.max), keys.count + components < Int(Int32.max) else {
            return "too many paths: their bytes exceed 4 GiB (line \(line)); split the manifest"
        }
        let h = PathIndex.hash(bytes)
        if let k = find(bytes, hash: h) {
            let key = keys[k]
            if key.isFile { return "duplicate path \(quoted(path)): first listed on line \(key.line)" }
            let file = keys[Int(key.firstFile)]
            return "path \(quoted(path)) (line \(line)) is a folder of \(quoted(text(file))) (line \(file.line)); a path cannot be both a file and a folder"
        }
        let fileKey = add(bytes, hash: h, line: line, firstFile: -1)
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
                return "path \(quoted(path)) (line \(line)) is inside \(quoted(text(key))), which is listed as a file on line \(key.line); a path cannot be both a file and a folder"
            }
            let k = add(folder, hash: hf, line: line, firstFile: fileKey)
            if isParent { lastParent = k }
            end = slash
        }
        return nil
    }

    /// The key of the folder of the path inserted last, a folder by then: a sorted manifest lists
    /// a folder's files one after another, and they need no hash and no lookup for it (a folder
    /// stays one: a later file at its path is found as a folder when it is inserted).
    private var lastParent = -1

    private func isLastParent(_ folder: UnsafeBufferPointer<UInt8>) -> Bool {
        guard lastParent >= 0, let b = folder.baseAddress else { return false }
        let key = keys[lastParent]
        guard Int(key.count) == folder.count else { return false }
        return storage.withUnsafeBufferPointer { store in
            guard let a = store.baseAddress else { return false }
            return memcmp(a + Int(key.start), b, folder.count) == 0
        }
    }

    private func text(_ key: Key) -> String {
        String(decoding: storage[key.range], as: UTF8.self)
    }

    private static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var hasher = Swift.Hasher()  // not MirrorCore.Hasher (the SHA one)
        hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
        return hasher.finalize()
    }

    private func find(_ bytes: UnsafeBufferPointer<UInt8>, hash h: Int) -> Int? {
        let mask = slots.count - 1
        var i = h & mask
        let tag = PathIndex.tag(h)
        return storage.withUnsafeBufferPointer { store -> Int? in
            while true {
                let slot = slots[i]
                if slot == 0 { return nil }
                if slot >> 32 == tag {
                    let k = Int(slot & 0xffff_ffff) - 1
                    let key = keys[k]
                    if Int(key.count) == bytes.count {
                        guard key.count > 0, let a = store.baseAddress, let b = bytes.baseAddress else { return k }
                        if memcmp(a + Int(key.start), b, bytes.count) == 0 { return k }
                    }
                }
                i = (i + 1) & mask
            }
        }
    }

    /// Adds a key known to be absent; returns its index.
    private mutating func add(_ bytes: UnsafeBufferPointer<UInt8>, hash h: Int, line: Int, firstFile: Int) -> Int {
        if !PathIndex.fits(keys.count + 1, in: slots.count) { rehash(slots.count * 2) }
        keys.append(Key(start: UInt32(truncatingIfNeeded: storage.count), count: UInt32(truncatingIfNeeded: bytes.count),
                        line: Int32(clamping: line), firstFile: Int32(truncatingIfNeeded: firstFile)))
        storage.append(contentsOf: bytes)
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
        let bytes = storage  // a second reference, so that `place` may change `self` meanwhile
        bytes.withUnsafeBufferPointer { store in
            for k in keys.indices {
                let key = keys[k]
                place(k, hash: PathIndex.hash(UnsafeBufferPointer(rebasing: store[key.range])))
            }
        }
    }
}
