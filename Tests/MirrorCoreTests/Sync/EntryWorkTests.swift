@testable import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
import MirrorFS
import MirrorTestSupport

/// One entry's work without a server (``EntryWork``): what it asks of the loop (``EntryEffect``)
/// after wrong bytes, and when its only host stopped answering. A real folder, journal and
/// threads; the effects are read, not carried out.
@Suite struct EntryWorkTests {
    static let url = "http://127.0.0.1:9/set/a.bin"

    /// A run's place on a fresh DEST, its threads and the work, for `body`; all closed after.
    static func withWork(_ body: (EntryWork, EntryTask) throws -> Void) throws {
        let dir = try TemporaryDirectory()
        var builder = ManifestBuilder(baseURL: "http://127.0.0.1:9/set/")
        builder.add(path: "a.bin", size: 5, sha256: String(repeating: "0", count: 64))
        let manifest = try ManifestLoader.parse(Array(builder.yaml.utf8), sourceName: "m.yaml")
        let options = SyncOptions(manifestPath: dir.path + "/m.yaml")
        let report = ConsoleReport(mode: .quiet, isTerminal: false)
        let place = try RunPlace.open(dir.path + "/dest", manifest: manifest, options: options, report: report)
        defer { place.lock.release() }
        let threads = try RunThreads(options: options)
        defer { threads.shutdown() }
        let work = EntryWork(options: options, manifest: manifest, place: place, threads: threads, stop: RunStop(deadline: nil),
                             freeConnections: { 1 }, manifestWatch: nil, report: report)
        let task = EntryTask(entry: manifest.entries[0], sources: [url], replacing: false)
        try body(work, task)
    }

    /// Wrong bytes: first fetched again from zero, asking caches to revalidate; the same wrong
    /// digest again from the revalidated source fails the entry as a mismatch. Never installed.
    @Test func wrongBytesAreFetchedAgainThenFailTheEntry() throws {
        try Self.withWork { work, task in
            task.move(to: .fetching)
            let partial = try work.openPartial(for: task)
            try [UInt8](repeating: 7, count: 5).withUnsafeBytes { try partial.append($0) }
            task.partial = partial
            partial.sourceURL = Self.url

            let first = work.checksumMismatch(task, partial: partial, detail: "expected 00…, got 07…", got: "07")
            guard first.count == 1, case .queue(let queued) = first[0] else {
                Issue.record("one effect, the entry queued again: \(first)")
                return
            }
            #expect(queued === task && task.attempt.fromZero && task.history.revalidating.contains(Self.url))
            #expect(task.state == .fetching, "the work asks; the loop's scheduler moves it to ready")

            let second = work.checksumMismatch(task, partial: partial, detail: "expected 00…, got 07…", got: "07")
            guard second.count == 1, case .fail(let failure) = second[0] else {
                Issue.record("one effect, the entry failed: \(second)")
                return
            }
            #expect(failure.cause == .checksumMismatch && failure.source == Self.url && !failure.unreachable)
            #expect(failure.message.contains("the same twice"))
            #expect(task.state == .failed)
        }
    }

    /// The entry's only host stopped answering earlier in the run: it is not asked, no partial
    /// file is made, and the loop is told it was never tried (left for a later run).
    @Test func anEntryWhoseHostWasGivenUpIsNotTried() throws {
        try Self.withWork { work, task in
            let marked = work.reachability.giveUp(on: Self.url)
            #expect(marked)
            let effects = work.start(task)
            guard effects.count == 1, case .notTried(let path) = effects[0] else {
                Issue.record("one effect, not tried: \(effects)")
                return
            }
            #expect(path == "a.bin" && task.state == .leftForLaterRun && task.partial == nil)
            let names = try work.place.partialFolder.entryNames()
            #expect(names.isEmpty, "nothing was created for it")
        }
    }
}
