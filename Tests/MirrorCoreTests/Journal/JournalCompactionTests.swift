@testable import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Compaction (``Journal/compact(current:)``) against a manifest asked through its path table, as
/// a sync asks it: which records stay, in which order they are written back, and a journal whose
/// compacted form is larger than one write buffer; and a journal read back after many
/// superseded records (the index repacks while it reads).
@Suite struct JournalCompactionTests {
    /// An entry of `size` bytes whose SHA-256 is every byte `byte` (``Digest/filled(_:_:)``).
    static func entry(_ path: String, _ byte: UInt8, size: Int64 = 5) -> ManifestEntry {
        .fixture(path, size: size, sha256: .filled(byte))
    }

    static func verified(_ identity: EntryIdentity, inode: UInt64 = 1, adopted: Bool = false) -> JournalRecord {
        .verified(VerifiedRecord(identity: identity, inode: inode, device: 1, mtime: FileTime(seconds: 3),
                                 ctime: FileTime(seconds: 4), adopted: adopted))
    }

    static func current(_ entries: [ManifestEntry]) -> Journal.CurrentEntry {
        let listing = PathIndex(listing: entries)
        return { path in listing.entryIndex(path).map { entries[$0] } }
    }

    func journal(in dir: TemporaryDirectory) throws -> Journal {
        let fd = open(dir.path, O_RDONLY | O_DIRECTORY)
        try #require(fd >= 0)
        return try Journal(folder: FileDescriptor(fd: fd, displayPath: dir.path), displayPath: "journal", readOnly: false)
    }

    /// Rule 5's bound: a journal is compacted once its superseded lines pass half its live
    /// records (plus 256), not at four times them, so a no-op never reads more than 1.5 × the
    /// journal it needs.
    @Test func deadWeightPastHalfTheLiveRecordsIsCompacted() throws {
        let dir = try TemporaryDirectory()
        let journal = try journal(in: dir)
        let writer = JournalWriter(journal)
        let identities = (0..<1000).map { EntryIdentity(path: "f\($0)", size: 5, digests: [.sha256: "ab"]) }
        for identity in identities { try writer.setUp(Self.verified(identity), durable: false) }
        let base = journal.lineCount
        #expect(!journal.needsCompaction(liveEntries: 1000))
        // Each path journaled again: the earlier lines are dead.
        for identity in identities[..<(500 + 256 - (base - 1000))] { try writer.setUp(Self.verified(identity, inode: 2), durable: false) }
        #expect(journal.lineCount == 1000 + 500 + 256, "\(journal.lineCount)")
        #expect(!journal.needsCompaction(liveEntries: 1000), "at the bound")
        try writer.setUp(Self.verified(identities[999], inode: 3), durable: false)
        #expect(journal.needsCompaction(liveEntries: 1000), "past 1.5 × live + 256")
        try writer.compact(current: { _ in nil })
        #expect(!journal.needsCompaction(liveEntries: 1000))
        #expect(journal.lineCount <= 1002, "\(journal.lineCount)")
    }

    @Test func whatTheManifestStillDescribesStaysAndNothingElse() throws {
        let dir = try TemporaryDirectory()
        let journal = try journal(in: dir)
        let a = Self.entry("a", 1), b = Self.entry("b", 2), d = Self.entry("d", 4), e = Self.entry("e", 5)
        let g = Self.entry("g", 7), nfc = Self.entry("caf\u{E9}", 8)
        let manifest = [a, b, d, e, g, nfc]
        let textDigest: PerAlgorithm<String> = [.sha256: "NOT-HEX"]
        let partialOfD = PartialRecord(identity: EntryIdentity(d), url: "http://127.0.0.1/d", validator: nil, bytes: 2)
        try JournalWriter(journal).setUp([
            Self.verified(EntryIdentity(a), adopted: true),                                      // current: stays
            Self.verified(EntryIdentity(path: "b", size: 5, digests: [.sha256: Digest.filled(9).hex])),  // another version: goes
            Self.verified(EntryIdentity(path: "c", size: 5, digests: [.sha256: Digest.filled(3).hex])),  // unlisted: stays
            Self.verified(EntryIdentity(d)),                                                     // current, and a partial after it
            .partial(partialOfD),
            .failed(FailedRecord(identity: EntryIdentity(e), error: "refused", time: 9)),        // current: stays
            .failed(FailedRecord(identity: EntryIdentity(path: "b", size: 6, digests: [.sha256: Digest.filled(2).hex]),
                                 error: "old", time: 1)),                                        // another version: goes
            Self.verified(EntryIdentity(path: "f", size: 5, digests: textDigest)),              // unlisted, a text digest: stays
            Self.verified(EntryIdentity(path: "g", size: 5, digests: textDigest)),              // listed, a text digest: goes
            Self.verified(EntryIdentity(path: "cafe\u{301}", size: 5, digests: [.sha256: Digest.filled(8).hex])),  // NFD: unlisted
        ])
        try JournalWriter(journal).setUp(.run(RunRecord(start: 1, end: 2, result: "ok", downloaded: 0, failed: 0, bytes: 0)), durable: true)

        try JournalWriter(journal).compact(current: Self.current(manifest))
        for reading in [journal, try self.journal(in: dir)] {
            #expect(reading.records(for: "a")?.verified?.adopted == true)
            #expect(reading.records(for: "b") == nil)
            #expect(reading.records(for: "c")?.verified != nil)
            #expect(reading.records(for: "d")?.verified?.identity == EntryIdentity(d))
            #expect(reading.records(for: "d")?.partial == partialOfD, "a verified record is written before the partial one")
            #expect(reading.records(for: "e")?.failed?.error == "refused")
            #expect(reading.records(for: "f")?.verified?.identity.digests == textDigest)
            #expect(reading.records(for: "g") == nil)
            #expect(reading.records(for: "cafe\u{301}")?.verified != nil, "the NFD spelling is not the listed NFC one")
            #expect(reading.records(for: "caf\u{E9}") == nil)
            #expect(reading.lastRun?.result == "ok")
        }
        #expect(access(dir.path("journal.tmp"), F_OK) != 0)
    }

    /// More kept records than one 4 MB write: the buffer is written several times, and the new
    /// file is read back in chunks.
    @Test func aCompactedJournalLargerThanItsBufferIsWholeAfterwards() throws {
        let dir = try TemporaryDirectory()
        let journal = try journal(in: dir)
        let entries = (0 ..< 30_000).map { Self.entry("folder/file-\($0).bin", UInt8(truncatingIfNeeded: $0), size: Int64($0)) }
        for round in 0 ..< 2 {
            try JournalWriter(journal).setUp(entries.map { Self.verified(EntryIdentity($0), inode: UInt64(round)) })
        }
        try JournalWriter(journal).compact(current: Self.current(entries))
        let reopened = try self.journal(in: dir)
        #expect(reopened.verifiedCount == entries.count)
        for (i, entry) in entries.enumerated() where i % 997 == 0 || i == entries.count - 1 {
            #expect(reopened.records(for: entry.path)?.verified?.inode == 1, "\(entry.path)")
        }
        #expect((FileDamage.size(of: dir.path("journal")) ?? 0) > 4 << 20)
    }

    /// Reading a journal with many superseded records repacks the index on the way; every path
    /// still answers with its latest record, the no-op compare included.
    @Test func aJournalOfManySupersededRecordsReadsBackItsLatestOnes() throws {
        let dir = try TemporaryDirectory()
        // Paths long enough that 100 rounds leave more dead bytes than the repack floor (16 MiB).
        let entries = (0 ..< 2000).map { Self.entry("folder-\($0 % 13)/file-\($0).bin", UInt8(truncatingIfNeeded: $0)) }
        do {
            let journal = try journal(in: dir)
            for round in 1 ... 100 {
                try JournalWriter(journal).setUp(entries.map { Self.verified(EntryIdentity($0), inode: UInt64(round)) })
            }
            try JournalWriter(journal).setUp(.removed(path: entries[0].path), durable: true)
        }
        let reopened = try journal(in: dir)
        #expect(reopened.verified.repacks > 0)
        #expect(reopened.verifiedCount == entries.count - 1)
        #expect(reopened.records(for: entries[0].path) == nil)
        for entry in entries.dropFirst() {
            let status = FileStatus(size: entry.size, mode: 0o100644, inode: 100, device: 1,
                                    mtime: FileTime(seconds: 3), ctime: FileTime(seconds: 4))
            #expect(reopened.isVerified(entry, status: status), "\(entry.path)")
        }
    }

    /// Kept records are written back in the order they were appended, each path's latest record in
    /// its own place, not in the index's hash order: a first sync journals in manifest order, and a
    /// later run's lookups, which come in that order, then walk the records forwards.
    @Test func keptRecordsStayInTheOrderTheyWereAppended() throws {
        let dir = try TemporaryDirectory()
        let journal = try journal(in: dir)
        let entries = (0 ..< 2000).map { Self.entry("d\($0 / 100)/f\($0)", UInt8(truncatingIfNeeded: $0)) }
        try JournalWriter(journal).setUp(entries.map { Self.verified(EntryIdentity($0)) })
        let again = entries.enumerated().filter { $0.offset % 7 == 3 }.map(\.element).reversed()
        try JournalWriter(journal).setUp(again.map { Self.verified(EntryIdentity($0), inode: 2) })
        try JournalWriter(journal).compact(current: Self.current(entries))

        let superseded = Set(again.map(\.path))
        let expected = entries.map(\.path).filter { !superseded.contains($0) } + again.map(\.path)
        #expect(try Self.verifiedPaths(dir.path("journal")) == expected)
    }

    /// A run killed after the last `run` record left records after it; the compacted journal
    /// still says so (a conversion to `--atomic` keeps the plain set only when none did), and a
    /// journal whose last run ended it says nothing followed.
    @Test func recordsAfterTheLastRunStayAfterIt() throws {
        let a = Self.entry("a", 1), b = Self.entry("b", 2)
        let ok = RunRecord(start: 1, end: 2, result: "ok", downloaded: 2, failed: 0, bytes: 10)
        for killed in [true, false] {
            let dir = try TemporaryDirectory()
            let journal = try journal(in: dir)
            try JournalWriter(journal).setUp([Self.verified(EntryIdentity(a)), Self.verified(EntryIdentity(b))])
            try JournalWriter(journal).setUp(.run(ok), durable: true)
            if killed { try JournalWriter(journal).setUp(Self.verified(EntryIdentity(a), inode: 2), durable: false) }
            try JournalWriter(journal).compact(current: Self.current([a, b]))
            for reading in [journal, try self.journal(in: dir)] {
                #expect(reading.lastRun == ok)
                #expect((reading.recordsSinceLastRun > 0) == killed, "killed: \(killed)")
                #expect(reading.records(for: "a")?.verified?.inode == (killed ? 2 : 1))
            }
        }
    }

    /// The `path=` of each `verified` line of a journal file, in file order.
    static func verifiedPaths(_ file: String) throws -> [String] {
        let fd = open(file, O_RDONLY)
        try #require(fd >= 0)
        let bytes = try FileDescriptor(fd: fd, displayPath: file).readAll()
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count > 2, fields[1] == "verified", fields[2].hasPrefix("path=") else { return nil }
            return String(fields[2].dropFirst(5))
        }
    }
}
