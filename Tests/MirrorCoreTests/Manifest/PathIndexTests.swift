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

    @Test(arguments: [UInt64(1), 2, 3])
    func clashesAmongManyPathsAreFoundWithTheFirstLine(seed: UInt64) {
        var random = Random(state: seed &* 0x9E37_79B9_7F4A_7C15 | 1)
        var index = PathIndex()
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
        // Each probe on a file of its own: a refused path may stay in the index (the reader
        // stops at the first refusal), so a file probed twice would meet its own probes.
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
}
