#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Every path seen so far, to enforce the spec's "no two entries have the same path, and no entry's
/// path is a folder of another's" with one hash lookup per new path and per new folder, so that
/// 10^6 entries cost O(total path length).
///
/// A small open-addressing table whose keys name bytes the entries already hold, rather than
/// `[String: Int]`: keys are paths and their folders (prefixes), which would otherwise each need a
/// String allocation, and Swift's String hashing normalises Unicode first. Hashing still goes
/// through `Hasher` (SipHash, randomly seeded per process), so a crafted manifest cannot force
/// collisions.
///
/// A key is "the first `count` bytes of entry `entry`'s path": the whole path for a file, a prefix
/// ending before a `/` for a folder (named after the first file listed under it, whose line the
/// messages give). The slot itself holds the key, so the table is all the index keeps: 8 bytes a
/// slot, 2^21 slots (16 MB) for 10^6 paths, where a table of slots pointing at 16-byte keys took
/// twice that at the peak of a no-op's reading (docs/performance.md, "Paths in the arena").
/// The entries are lent to each insertion while a manifest is read (the reader appends to them:
/// holding them here would copy them), and kept by an index made ``init(listing:)``.
///
/// While a manifest's paths come in strictly increasing byte order (the order `manifest create`
/// writes), no table is built at all: a path greater than the one before repeats none, and it
/// can be inside an earlier file only if that file's path is a prefix of it, which a short stack
/// of such files answers (``sortedPrelude``). At 10^6 entries the table's hashing and probing, a
/// cache miss per path, were about a tenth of a no-op's reading of the manifest. The first path
/// out of order, or one the stack finds inside a file, builds the table from the entries before
/// it and goes on as before, so every message is the table's.
package struct PathIndex: Sendable {
    /// The first `count` bytes of entry `entry`'s path.
    private struct Key {
        var entry: Int
        var count: Int
    }

    /// 0 for an empty slot, else, from the top: 20 bits of the key's hash, its `count` (16 bits;
    /// `longCount` for a key as long as that or longer), and 1 + its entry (28 bits), or for a long
    /// key 1 + its place in `longKeys`. Probing compares the hash bits and the count in the slot and
    /// reads the entry's bytes only on a probable match.
    /// Power-of-two size, at most three quarters full: linear probing then needs about 2.5 slots
    /// for a key that is there and 8.5 for one that is not, all but the first in the same few
    /// cache lines.
    private var slots: [UInt64] = Array(repeating: 0, count: 64)
    private var keyCount = 0
    /// Keys of `longCount` bytes or more (a path that long cannot be a file on Linux, whose
    /// PATH_MAX is 4096, but the manifest's rules do not refuse it, so the index must hold it).
    private var longKeys: [Key] = []
    /// The entries whose paths an index made ``init(listing:)`` holds; empty while a manifest is read.
    private let listing: [ManifestEntry]
    /// The key of the folder of the path inserted last: a sorted manifest lists a folder's files
    /// one after another, and they need no hash and no lookup for it (a folder stays one: a later
    /// file at its path is found as a folder when it is inserted).
    private var lastParent: Key?
    /// The new folders of the path being inserted (their byte counts and hashes), kept between
    /// insertions so that their room is allocated once.
    private var newFolders: [(count: Int, hash: Int)] = []
    /// Every path so far came in strictly increasing byte order, and the table is not built yet.
    private var sortedPrelude: Bool
    /// In the sorted prelude: the entries whose path is a prefix of the path inserted last (it
    /// among them), shortest first. Every path between such a file and the next path starts with
    /// it, so a later path that starts with none of them cannot start with any earlier path.
    private var prefixFiles: [Int] = []
    /// The keys ``reserve(_:)`` was asked for while no table was built.
    private var reservedKeys = 0

    private static let entryBits: UInt64 = 28
    private static let refMask: UInt64 = (1 << entryBits) - 1
    private static let longCount = 0xFFFF
    /// Entries (and long keys) are counted in `entryBits` bits. A manifest is under 2 GiB
    /// (``YAMLParser``) and an entry takes at least ~90 bytes of it, so ~24 million at most.
    private static let maxEntries = Int(refMask) - 1

    /// `sortedPrelude`: check paths that come sorted without the table (the default); false, the
    /// table from the first path on (the fuzzer compares the two).
    init(sortedPrelude: Bool = true) {
        listing = []
        self.sortedPrelude = sortedPrelude
    }

    /// Room for `count` keys, paths and folders together. The table is written in full when made
    /// (resident at once), so `count` should not be a generous guess. Only before the first path:
    /// the table grows by itself later. In the sorted prelude, kept for when the table is built.
    mutating func reserve(_ count: Int) {
        guard keyCount == 0 else { return }
        if sortedPrelude {
            reservedKeys = count
            return
        }
        var size = slots.count
        while !PathIndex.fits(count, in: size) { size *= 2 }
        if size > slots.count { slots = Array(repeating: 0, count: size) }
    }

    private static func fits(_ keys: Int, in slots: Int) -> Bool { keys * 4 <= slots * 3 }

    /// Records `path`, the path of entry `earlier.count`, listed on `line` after `earlier`;
    /// returns a message when it repeats or clashes with an earlier path, and then records nothing.
    mutating func insert(_ path: ManifestPath, line: Int, after earlier: [ManifestEntry]) -> String? {
        guard earlier.count < PathIndex.maxEntries, longKeys.count < PathIndex.maxEntries else {
            return "too many paths and folders (line \(line)); split the manifest"
        }
        if sortedPrelude {
            if path.withBytes({ followsInOrder($0, earlier: earlier) }) { return nil }
            // Out of order, or inside an earlier file: the table, and the table's message.
            sortedPrelude = false
            buildTable(earlier)
        }
        let paths = Paths(entries: earlier, pending: path)
        return path.withBytes { insert($0, entry: earlier.count, paths: paths) }
            .map { clash in clash.message(path: path.string, line: line, paths: paths) }
    }

    /// In the sorted prelude: whether `bytes`, the path of entry `earlier.count`, is greater than
    /// the path before it and inside no earlier file; then it is recorded (as a prefix file).
    private mutating func followsInOrder(_ bytes: UnsafeBufferPointer<UInt8>, earlier: [ManifestEntry]) -> Bool {
        if let last = earlier.last {
            let greater = last.pathBytes.withBytes { before in
                before.lexicographicallyPrecedes(bytes)
            }
            guard greater else { return false }
        }
        while let top = prefixFiles.last, !earlier[top].pathBytes.withBytes({ bytes.starts(with: $0) }) {
            prefixFiles.removeLast()
        }
        // Each file left is a prefix of `bytes`: a `/` after it makes it a folder of `bytes`.
        let insideAFile = prefixFiles.contains { file in
            earlier[file].pathBytes.withBytes { bytes.count > $0.count && bytes[$0.count] == UInt8(ascii: "/") }
        }
        guard !insideAFile else { return false }
        prefixFiles.append(earlier.count)
        return true
    }

    /// Leaves the sorted prelude: the table of `earlier` (paths already checked: no clash).
    private mutating func buildTable(_ earlier: [ManifestEntry]) {
        prefixFiles = []
        reserve(max(reservedKeys, earlier.count))
        let paths = Paths(entries: earlier, pending: nil)
        for (i, entry) in earlier.enumerated() {
            _ = entry.pathBytes.withBytes { insert($0, entry: i, paths: paths) }
        }
    }

    /// The paths of `entries` (a valid manifest's: no repeats, no path a folder of another) and
    /// their folders, pointing into the entries' own bytes: what deleting and the building of a
    /// generation ask "is it listed?" of, for 8 bytes a slot where a `Set` of `[UInt8]` took ~75.
    package init(listing entries: [ManifestEntry]) {
        listing = entries
        sortedPrelude = false
        reserve(entries.count)
        let paths = Paths(entries: entries, pending: nil)
        for (i, entry) in entries.enumerated() where i < PathIndex.maxEntries {
            _ = entry.pathBytes.withBytes { insert($0, entry: i, paths: paths) }
        }
    }

    /// Whether a listed entry has exactly this path.
    package func containsFile(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool { entryIndex(bytes) != nil }

    /// For an index made ``init(listing:)``: the position in its entries of the entry with exactly
    /// this path.
    package func entryIndex(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        let paths = Paths(entries: listing, pending: nil)
        return find(bytes, hash: PathIndex.hash(bytes), paths: paths).flatMap { paths.isFile($0) ? $0.entry : nil }
    }

    /// Whether some listed entry lies in this folder (at any depth).
    func containsFolder(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let paths = Paths(entries: listing, pending: nil)
        return find(bytes, hash: PathIndex.hash(bytes), paths: paths).map { !paths.isFile($0) } ?? false
    }

    package func containsFile(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBufferPointer { containsFile($0) } }
    package func containsFolder(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBufferPointer { containsFolder($0) } }

    /// Why a path was refused: the key it met.
    private enum Clash {
        case repeated(Key)
        case underAFile(Key)

        func message(path: String, line: Int, paths: Paths) -> String {
            switch self {
            case .repeated(let key) where paths.isFile(key):
                return "duplicate path \(quoted(path)): first listed on line \(paths.line(key.entry))"
            case .repeated(let key):
                return "path \(quoted(path)) (line \(line)) is a folder of \(quoted(paths.text(key.entry))) (line \(paths.line(key.entry))); a path cannot be both a file and a folder"
            case .underAFile(let key):
                return "path \(quoted(path)) (line \(line)) is inside \(quoted(paths.text(key.entry))), which is listed as a file on line \(paths.line(key.entry)); a path cannot be both a file and a folder"
            }
        }
    }

    /// Checks `bytes`, the path of `entry`, against every key; only when it clashes with none are
    /// it and its new folders added.
    private mutating func insert(_ bytes: UnsafeBufferPointer<UInt8>, entry: Int, paths: Paths) -> Clash? {
        let h = PathIndex.hash(bytes)
        if let key = find(bytes, hash: h, paths: paths) { return .repeated(key) }
        // Folders from the longest prefix down. Once a prefix is already known, so are all shorter
        // ones, and they were checked against the files when they were added.
        newFolders.removeAll(keepingCapacity: true)
        var parent: Key?
        var end = bytes.count
        while let slash = bytes[..<end].lastIndex(of: UInt8(ascii: "/")) {
            let folder = UnsafeBufferPointer(rebasing: bytes[..<slash])
            let isParent = end == bytes.count
            if isParent, let last = lastParent, paths.matches(last, folder) {
                parent = last
                break
            }
            let hf = PathIndex.hash(folder)
            if let key = find(folder, hash: hf, paths: paths) {
                if paths.isFile(key) { return .underAFile(key) }
                if isParent { parent = key }
                break
            }
            newFolders.append((slash, hf))
            end = slash
        }
        add(Key(entry: entry, count: bytes.count), hash: h, paths: paths)
        for folder in newFolders { add(Key(entry: entry, count: folder.count), hash: folder.hash, paths: paths) }
        // The first new folder, if any, is the path's parent: the walk stops at the first known one.
        if parent == nil, let first = newFolders.first { parent = Key(entry: entry, count: first.count) }
        if let parent { lastParent = parent }
        return nil
    }

    private static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var hasher = Swift.Hasher()  // not MirrorModel.Hasher (the SHA one)
        hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
        return hasher.finalize()
    }

    private static func tag(_ hash: Int) -> UInt64 { UInt64(UInt(bitPattern: hash) >> 44) }

    /// The count a slot holds for a key of `count` bytes.
    private static func slotCount(_ count: Int) -> UInt64 { UInt64(min(count, longCount)) }

    private func key(in slot: UInt64) -> Key {
        let ref = Int(slot & PathIndex.refMask) - 1
        let count = Int((slot >> PathIndex.entryBits) & 0xFFFF)
        return count == PathIndex.longCount ? longKeys[ref] : Key(entry: ref, count: count)
    }

    private func find(_ bytes: UnsafeBufferPointer<UInt8>, hash h: Int, paths: Paths) -> Key? {
        let mask = slots.count - 1
        var i = h & mask
        let probe = PathIndex.tag(h) << 16 | PathIndex.slotCount(bytes.count)
        while true {
            let slot = slots[i]
            if slot == 0 { return nil }
            if slot >> PathIndex.entryBits == probe {
                let key = key(in: slot)
                if paths.matches(key, bytes) { return key }
            }
            i = (i + 1) & mask
        }
    }

    /// Adds a key known to be absent.
    private mutating func add(_ key: Key, hash h: Int, paths: Paths) {
        if !PathIndex.fits(keyCount + 1, in: slots.count) { rehash(slots.count * 2, paths: paths) }
        let ref: Int
        if key.count >= PathIndex.longCount {
            longKeys.append(key)
            ref = longKeys.count - 1
        } else {
            ref = key.entry
        }
        place(PathIndex.tag(h) << (16 + PathIndex.entryBits) | PathIndex.slotCount(key.count) << PathIndex.entryBits
              | UInt64(ref + 1), hash: h)
        keyCount += 1
    }

    private mutating func place(_ slot: UInt64, hash: Int) {
        let mask = slots.count - 1
        var i = hash & mask
        while slots[i] != 0 { i = (i + 1) & mask }
        slots[i] = slot
    }

    private mutating func rehash(_ size: Int, paths: Paths) {
        let old = slots
        slots = Array(repeating: 0, count: size)
        for slot in old where slot != 0 {
            let h = paths.withBytes(key(in: slot)) { PathIndex.hash($0) }
            place(slot, hash: h)
        }
    }

    /// Where keys' bytes are: the entries, and the path being inserted, whose entry is not yet
    /// among them (entry `entries.count`).
    private struct Paths {
        let entries: [ManifestEntry]
        let pending: ManifestPath?

        private func path(_ entry: Int) -> ManifestPath? {
            entry < entries.count ? entries[entry].pathBytes : pending
        }

        @inline(__always)
        func withBytes<R>(_ key: Key, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
            guard let path = path(key.entry) else { return body(UnsafeBufferPointer(start: nil, count: 0)) }
            return path.withBytes { body(UnsafeBufferPointer(rebasing: $0.prefix(key.count))) }
        }

        /// Whether `key`'s bytes are `bytes`.
        @inline(__always)
        func matches(_ key: Key, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            guard key.count == bytes.count else { return false }
            guard let b = bytes.baseAddress, key.count > 0 else { return true }
            return withBytes(key) { a in a.count == bytes.count && a.baseAddress.map { memcmp($0, b, bytes.count) == 0 } ?? false }
        }

        func isFile(_ key: Key) -> Bool { key.count == (path(key.entry)?.byteCount ?? key.count) }
        func text(_ entry: Int) -> String { path(entry)?.string ?? "" }
        func line(_ entry: Int) -> Int { entry < entries.count ? entries[entry].line : 0 }
    }
}
