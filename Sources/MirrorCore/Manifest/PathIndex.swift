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
    private struct Key {
        var start: Int          // in `storage`
        var count: Int
        var hash: Int
        var line: Int
        var isFile: Bool
        /// For a folder: the key of the first file listed under it.
        var firstFile: Int
    }

    private var storage: [UInt8] = []
    private var keys: [Key] = []
    /// 0 for an empty slot, else (high 32 bits of the key's hash) << 32 | (key index + 1): probing
    /// compares hashes in the table itself and touches `keys` only on a probable match.
    /// Power-of-two size, at most half full.
    private var slots: [UInt64] = Array(repeating: 0, count: 64)

    mutating func reserve(_ count: Int) {
        storage.reserveCapacity(count * 32)
        keys.reserveCapacity(count * 2)
        var size = slots.count
        while size < count * 4 { size *= 2 }
        if size > slots.count { rehash(size) }
    }

    /// Records `path`; returns a message when it repeats or clashes with an earlier path.
    mutating func insert(_ path: String, line: Int) -> String? {
        var contiguous = path  // withUTF8 is mutating: it may make the string contiguous first
        return contiguous.withUTF8 { insert(bytes: $0, path: path, line: line) }
    }

    private mutating func insert(bytes: UnsafeBufferPointer<UInt8>, path: String, line: Int) -> String? {
        if let k = find(bytes) {
            let key = keys[k]
            if key.isFile { return "duplicate path \(quoted(path)): first listed on line \(key.line)" }
            let file = keys[key.firstFile]
            return "path \(quoted(path)) (line \(line)) is a folder of \(quoted(text(file))) (line \(file.line)); a path cannot be both a file and a folder"
        }
        let fileKey = add(bytes, line: line, isFile: true, firstFile: -1)
        // Folders from the longest prefix down. Once a prefix is already known, so are all shorter
        // ones, and they were checked against the files when they were added.
        var end = bytes.count
        while let slash = bytes[..<end].lastIndex(of: UInt8(ascii: "/")) {
            let folder = UnsafeBufferPointer(rebasing: bytes[..<slash])
            if let k = find(folder) {
                let key = keys[k]
                if !key.isFile { break }
                return "path \(quoted(path)) (line \(line)) is inside \(quoted(text(key))), which is listed as a file on line \(key.line); a path cannot be both a file and a folder"
            }
            _ = add(folder, line: line, isFile: false, firstFile: fileKey)
            end = slash
        }
        return nil
    }

    private func text(_ key: Key) -> String {
        String(decoding: storage[key.start ..< key.start + key.count], as: UTF8.self)
    }

    private static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var hasher = Swift.Hasher()  // not MirrorCore.Hasher (the SHA one)
        hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
        return hasher.finalize()
    }

    private func find(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        let h = PathIndex.hash(bytes)
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
                    if key.hash == h, key.count == bytes.count {
                        guard key.count > 0, let a = store.baseAddress, let b = bytes.baseAddress else { return k }
                        if memcmp(a + key.start, b, key.count) == 0 { return k }
                    }
                }
                i = (i + 1) & mask
            }
        }
    }

    /// Adds a key known to be absent; returns its index.
    private mutating func add(_ bytes: UnsafeBufferPointer<UInt8>, line: Int, isFile: Bool, firstFile: Int) -> Int {
        if (keys.count + 1) * 2 > slots.count { rehash(slots.count * 2) }
        let h = PathIndex.hash(bytes)
        keys.append(Key(start: storage.count, count: bytes.count, hash: h, line: line, isFile: isFile,
                        firstFile: firstFile))
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
        for k in keys.indices { place(k, hash: keys[k].hash) }
    }
}
