@testable import MirrorModel
import Testing
@testable import MirrorCore

/// ``PlannedEntries``: the plan's entries wait as indexes, in order, and become tasks only as
/// they come up; a resume's task made at planning keeps its place and is counted once.
@Suite struct PlannedEntriesTests {
    /// The `i`th entry: `f<i>`, of `i + 1` bytes, with no digests.
    static func entry(_ i: Int) -> ManifestEntry {
        .fixture("f\(i)", size: Int64(i + 1), sha256: nil)
    }

    @Test func tasksAreMadeInOrderOnlyWhenTaken() {
        let entries = (0 ..< 10_000).map(Self.entry)
        var madeCount = 0
        let planned = PlannedEntries(entries: entries) { entry, replacing in
            madeCount += 1
            return EntryTask(entry: entry, sources: [], replacing: replacing)
        }
        let resumed = EntryTask(entry: entries[3], sources: [], replacing: false)
        for i in entries.indices {
            if i == 3 { planned.append(resumed) } else { planned.append(index: i, replacing: i % 2 == 1) }
        }
        #expect(madeCount == 0 && planned.remaining == 10_000)
        #expect(planned.unmade == 9999 && planned.unmadeBytes == (1 ... 10_000).reduce(0) { $0 + Int64($1) } - 4,
                "the resume is counted among the run's tasks, not here")

        // Entries 5, 15, 25, ... wait for another's content.
        let withdrawn = planned.withdraw { entry, _ in entry.path.hasSuffix("5") }
        #expect(withdrawn.map(\.entry.path) == stride(from: 5, to: 10_000, by: 10).map { "f\($0)" })
        #expect(madeCount == 1000 && planned.remaining == 9000)

        var taken: [EntryTask] = []
        while let task = planned.next() { taken.append(task) }
        let expected = entries.indices.filter { $0 % 10 != 5 }
        #expect(taken.map(\.entry.path) == expected.map { "f\($0)" })
        #expect(taken.first { $0.entry.path == "f3" } === resumed)
        #expect(taken.allSatisfy { $0.replacing == (Int($0.entry.path.dropFirst()).map { $0 % 2 == 1 } ?? false) || $0 === resumed })
        #expect(madeCount == 1000 + 8999 && planned.remaining == 0 && planned.unmade == 0 && planned.unmadeBytes == 0)
        #expect(planned.next() == nil)
    }
}
