@testable import MirrorModel
import Testing
@testable import MirrorCore

/// ``PathIndex`` at a size where its table grows many times from 64 slots and runs three
/// quarters full: every clash the spec forbids is still found, with the line of the first path,
/// and nothing else is reported. Seeded, so a failure replays (the seed is in its message).
struct PathIndexTests {
    /// xorshift64*, deterministic.
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            return state &* 2_685_821_657_736_338_717
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    }

    /// A manifest's reading: the index and the entries it names, each appended once its path is accepted.
    struct Reading {
        var index = PathIndex()
        var entries: [ManifestEntry] = []

        init(sortedPrelude: Bool = true) { index = PathIndex(sortedPrelude: sortedPrelude) }

        mutating func insert(_ path: String, line: Int) -> String? {
            let bytes = ManifestPath(path)
            let refused = index.insert(bytes, line: line, after: entries)
            if refused == nil { entries.append(ManifestEntry(pathBytes: bytes, url: nil, size: 0, digests: DigestSet(), line: line)) }
            return refused
        }
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func clashesAmongManyPathsAreFoundWithTheFirstLine(seed: UInt64) {
        var random = Random(state: seed &* 0x9E37_79B9_7F4A_7C15 | 1)
        var index = Reading()
        var files: [(path: String, line: Int)] = []
        // 60,000 files in folders two and three deep; line numbers as a manifest would have them.
        for i in 0 ..< 60_000 {
            let depth = 1 + random.below(2)
            var parts = (0 ..< depth).map { _ in "d\(random.below(40))" }
            parts.append("f\(i)")
            let path = parts.joined(separator: "/")
            let line = 4 + 3 * i
            #expect(index.insert(path, line: line) == nil, "seed \(seed): \(path) refused")
            files.append((path, line))
        }
        // Each probe on a file of its own, so that each file's clashes are first met here.
        var probed = Set<Int>()
        while probed.count < 200 {
            let pick = random.below(files.count)
            guard probed.insert(pick).inserted else { continue }
            let (path, line) = files[pick]
            // The same path again: a duplicate, naming the first line.
            #expect(index.insert(path, line: 999_999) == "duplicate path \"\(path)\": first listed on line \(line)",
                    "seed \(seed)")
            // A path below a file: the file cannot be a folder.
            #expect(index.insert(path + "/x", line: 999_999)
                        == "path \"\(path)/x\" (line 999999) is inside \"\(path)\", which is listed as a file on line \(line); a path cannot be both a file and a folder",
                    "seed \(seed)")
            // A file where a folder is: named with the first file listed under it.
            let folder = String(path[..<path.lastIndex(of: "/")!])
            let refused = index.insert(folder, line: 999_999)
            #expect(refused?.hasPrefix("path \"\(folder)\" (line 999999) is a folder of ") == true, "seed \(seed): \(String(describing: refused))")
        }
        // A new path in a known folder is still accepted after all that.
        #expect(index.insert("d1/new-file", line: 1_000_000) == nil, "seed \(seed)")
    }

    /// A refused path leaves nothing behind: not its own key, whose entry is never appended (its
    /// bytes would then be read from an entry that does not exist), and not its new folders.
    @Test func aRefusedPathLeavesNoKey() {
        var index = Reading()
        #expect(index.insert("a/b", line: 4) == nil)
        let inside = "path \"a/b/c/d\" (line 7) is inside \"a/b\", which is listed as a file on line 4; a path cannot be both a file and a folder"
        #expect(index.insert("a/b/c/d", line: 7) == inside)
        #expect(index.insert("a/b/c/d", line: 7) == inside)
        #expect(index.insert("a/b/c", line: 7) == "path \"a/b/c\" (line 7) is inside \"a/b\", which is listed as a file on line 4; a path cannot be both a file and a folder")
        #expect(index.insert("a/c", line: 8) == nil)
        #expect(index.entries.count == 2)
    }

    /// Keys of 65,535 bytes and more, whose length a slot cannot hold, are told apart by their
    /// own length: a long path, its long folder and a file under it.
    @Test func longPathsAndFoldersAreKeysLikeAnyOther() {
        let folder = String(repeating: "x", count: 70_000)
        var index = Reading()
        #expect(index.insert(folder + "/a", line: 4) == nil)
        #expect(index.insert(folder + "/b", line: 5) == nil)
        #expect(index.insert(folder + "/a", line: 6)?.hasPrefix("duplicate path") == true)
        #expect(index.insert(folder, line: 7)?.contains("is a folder of") == true)
        #expect(index.insert(folder + "/c/d", line: 8) == nil)
        #expect(index.insert(folder + "/c", line: 9)?.contains("is a folder of") == true)
        // Asked apart from the expectations, which would print the whole index when they fail.
        let listing = PathIndex(listing: index.entries)
        let folderIsAFolder = listing.containsFolder(Array((folder + "/c").utf8))
        let fileIsAFile = listing.containsFile(Array((folder + "/c/d").utf8))
        let folderIsAFile = listing.containsFile(Array((folder + "/c").utf8))
        let b = Array((folder + "/b").utf8).withUnsafeBufferPointer { listing.entryIndex($0) }
        #expect(folderIsAFolder && fileIsAFile && !folderIsAFile)
        #expect(b == 1)
    }

    /// Paths that come sorted are checked without the table until one does not (``PathIndex``'s
    /// sorted prelude): every verdict and message must be the table's. Short paths over a few
    /// bytes that sort around `/` (`-` and `.` below it, letters above), mostly in order, so
    /// that files turn into folders of later paths, repeats follow, and order breaks now and then.
    @Test(arguments: [UInt64(11), 12, 13, 14, 15, 16])
    func pathsCheckedInOrderGetTheTablesVerdicts(seed: UInt64) {
        var random = Random(state: seed &* 0x9E37_79B9_7F4A_7C15 | 1)
        let alphabet: [Character] = ["a", "b", "-", ".", "/"]
        for round in 0 ..< 200 {
            var paths: [String] = []
            for _ in 0 ..< 2 + random.below(12) {
                var path = String((0 ..< 1 + random.below(5)).map { _ in alphabet[random.below(alphabet.count)] })
                while path.hasPrefix("/") || path.hasSuffix("/") || path.contains("//") { path = "a" + path.replacingOccurrences(of: "//", with: "/a/") + "b" }
                paths.append(path)
            }
            // Mostly sorted by bytes, with a repeat or a swap now and then.
            paths.sort { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            if random.below(3) == 0 {
                let pick = random.below(paths.count)
                paths.insert(paths[pick], at: min(paths.count, pick + 1 + random.below(3)))
            }
            if random.below(4) == 0, paths.count > 2 { paths.swapAt(random.below(paths.count), random.below(paths.count)) }
            var sorted = Reading(sortedPrelude: true)
            var table = Reading(sortedPrelude: false)
            for (i, path) in paths.enumerated() {
                let line = 4 + 3 * i
                let a = sorted.insert(path, line: line), b = table.insert(path, line: line)
                #expect(a == b, "seed \(seed), round \(round): \(paths), \(path): \(a ?? "accepted") vs \(b ?? "accepted")")
            }
        }
    }

    @Test func aFileBecomesAFolderPastPathsThatSortBetween() {
        var reading = Reading()
        #expect(reading.insert("a/b", line: 4) == nil)
        #expect(reading.insert("a/b-x", line: 7) == nil)
        #expect(reading.insert("a/b.txt", line: 10) == nil)
        #expect(reading.insert("a/b/c", line: 13)
                == "path \"a/b/c\" (line 13) is inside \"a/b\", which is listed as a file on line 4; a path cannot be both a file and a folder")
    }
}
