@testable import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Journal recovery: what a crash can leave behind (a torn last line, garbage, a flipped byte)
/// must be detected, ignored and cut off, never trusted.
@Suite struct JournalTests {
    let identity = EntryIdentity(path: "videos/intro.mp4", size: 1000, digests: [.sha256: String(repeating: "ab", count: 32)])

    func openFolder(_ dir: TemporaryDirectory) throws -> FileDescriptor {
        let fd = open(dir.path, O_RDONLY | O_DIRECTORY)
        try #require(fd >= 0)
        return FileDescriptor(fd: fd, displayPath: dir.path)
    }

    func journalBytes(_ dir: TemporaryDirectory) throws -> [UInt8] {
        let fd = open(dir.path("journal"), O_RDONLY)
        try #require(fd >= 0)
        return try FileDescriptor(fd: fd, displayPath: "journal").readAll()
    }

    func append(_ dir: TemporaryDirectory, _ text: [UInt8]) throws {
        let fd = open(dir.path("journal"), O_WRONLY | O_APPEND)
        try #require(fd >= 0)
        try FileDescriptor(fd: fd, displayPath: "journal").append(text)
    }

    /// The manifest of one entry, `listed`, as compaction asks it.
    func current(_ listed: EntryIdentity) -> Journal.CurrentEntry {
        let digests: DigestSet = listed.digests.compactMapValues { Digest(hex: $0, byteCount: 32) }
        let entry = ManifestEntry(path: listed.path, url: .relative(listed.path), size: listed.size, digests: digests)
        return { path in path.elementsEqual(listed.path.utf8) ? entry : nil }
    }

    func partial(_ bytes: Int64) -> JournalRecord {
        .partial(PartialRecord(identity: identity, url: "http://127.0.0.1/x", validator: "\"etag 1\"", bytes: bytes))
    }

    @Test func recordsRoundTripThroughTheFile() throws {
        let dir = try TemporaryDirectory()
        do {
            let journal = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
            try JournalWriter(journal).setUp(partial(100), durable: true)
            try JournalWriter(journal).setUp(partial(200), durable: true)
            let status = FileStatus(size: 1000, mode: 0o100644, inode: 7, device: 9,
                                    mtime: FileTime(seconds: 5, nanoseconds: 6), ctime: FileTime(seconds: 7, nanoseconds: 8))
            try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: identity, status: status)), durable: true)
        }
        let reopened = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
        let records = try #require(reopened.records(for: identity.path))
        #expect(records.partial == nil, "a verified record supersedes the partial")
        #expect(records.verified?.inode == 7)
        #expect(records.verified?.ctime == FileTime(seconds: 7, nanoseconds: 8))
        #expect(reopened.droppedTailBytes == 0)
    }

    /// Verified records are looked up lazily (by a hash of the encoded path, then checked): the
    /// latest one wins, odd paths are found under their own name, and nothing else is.
    @Test func verifiedRecordsAreFoundByTheirOwnPathOnly() throws {
        let dir = try TemporaryDirectory()
        let paths = ["a.bin", "run 7/a=b%c\tд.tar", "b.bin"]
        func status(_ inode: UInt64) -> FileStatus {
            FileStatus(size: 1, mode: 0o100644, inode: inode, device: 1,
                       mtime: FileTime(seconds: 1, nanoseconds: 0), ctime: FileTime(seconds: 1, nanoseconds: 0))
        }
        func id(_ path: String) -> EntryIdentity { EntryIdentity(path: path, size: 1, digests: [.sha256: "00"]) }
        do {
            let journal = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
            for (i, path) in paths.enumerated() {
                try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: id(path), status: status(UInt64(i)))), durable: false)
            }
            try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: id("a.bin"), status: status(42))), durable: true)
            #expect(journal.records(for: "a.bin")?.verified?.inode == 42, "an appended record is found at once")
        }
        let reopened = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: true)
        #expect(reopened.records(for: "a.bin")?.verified?.inode == 42, "the latest record wins")
        #expect(reopened.records(for: paths[1])?.verified?.inode == 1)
        #expect(reopened.records(for: "b.bin")?.verified?.inode == 2)
        #expect(reopened.records(for: "c.bin") == nil)
        #expect(reopened.records(for: "run 7/a=b%c") == nil)
        #expect(Set(reopened.entries.keys) == Set(paths.map(PathKey.init)))
    }

    @Test func spacesEqualsAndPercentInValuesSurvive() throws {
        let dir = try TemporaryDirectory()
        let odd = EntryIdentity(path: "run 7/a=b%c\tд.tar", size: 1, digests: [.sha256: "00"])
        do {
            let journal = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
            try JournalWriter(journal).setUp(.failed(FailedRecord(identity: odd, error: "HTTP 404 = gone", time: 1)), durable: true)
        }
        let reopened = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: true)
        #expect(reopened.records(for: odd.path)?.failed?.error == "HTTP 404 = gone")
    }

    /// A crash mid-append leaves a line without its newline: dropped and truncated away.
    @Test(arguments: [1, 5, 9, 20, 60])
    func tornLastLineIsDroppedAndTruncated(cut: Int) throws {
        let dir = try TemporaryDirectory()
        do {
            let journal = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
            try JournalWriter(journal).setUp(partial(100), durable: true)
        }
        let goodLength = try journalBytes(dir).count
        try append(dir, Array(partial(200).encodedLine().prefix(cut)))

        let reopened = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
        #expect(reopened.records(for: identity.path)?.partial?.bytes == 100)
        #expect(reopened.droppedTailBytes == cut)
        #expect(try journalBytes(dir).count == goodLength, "the torn tail is cut off the file")
        // And the journal stays usable after the repair.
        try JournalWriter(reopened).setUp(partial(300), durable: true)
        let again = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
        #expect(again.records(for: identity.path)?.partial?.bytes == 300)
    }

    @Test func garbageAndFlippedBytesEndTheJournal() throws {
        let dir = try TemporaryDirectory()
        do {
            let journal = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
            try JournalWriter(journal).setUp(partial(100), durable: true)
        }
        var line = partial(999).encodedLine()
        line[line.count - 3] ^= 0x01  // one flipped bit inside a complete line
        try append(dir, line)
        try append(dir, Array("garbage\n".utf8))
        try append(dir, partial(5000).encodedLine())  // valid, but after the damage: not trusted

        let reopened = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
        #expect(reopened.records(for: identity.path)?.partial?.bytes == 100)
        #expect(reopened.droppedTailBytes > 0)
    }

    @Test func readOnlyOpenChangesNothing() throws {
        let dir = try TemporaryDirectory()
        do {
            let journal = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
            try JournalWriter(journal).setUp(partial(100), durable: true)
        }
        try append(dir, Array("torn".utf8))
        let before = try journalBytes(dir)
        let reader = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: true)
        #expect(reader.records(for: identity.path)?.partial?.bytes == 100)
        #expect(try journalBytes(dir) == before)
    }

    @Test func aMissingJournalIsEmptyAndAForeignFileIsReplaced() throws {
        let dir = try TemporaryDirectory()
        let none = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: true)
        #expect(none.entries.isEmpty)
        #expect(access(dir.path("journal"), F_OK) != 0, "read-only open creates nothing")

        try Array("not a journal at all\n".utf8).withUnsafeBytes { raw in
            let fd = open(dir.path("journal"), O_WRONLY | O_CREAT, 0o644)
            try FileDescriptor(fd: fd, displayPath: "journal").write(raw, at: 0)
        }
        let journal = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
        #expect(journal.entries.isEmpty)
        #expect(String(decoding: try journalBytes(dir), as: UTF8.self) == "mirror-journal 1\n")
    }

    /// `--delete` needs the verified records of paths the manifest no longer lists: compaction
    /// keeps them (and drops an obsolete record of a path still listed); a `removed` record drops
    /// every record of its path, and an adopted file keeps its `found=1` mark.
    @Test func compactionKeepsFilesInstalledForPathsNoLongerListed() throws {
        let dir = try TemporaryDirectory()
        let journal = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
        let status = FileStatus(size: 5, mode: 0o100644, inode: 7, device: 1, mtime: FileTime(seconds: 1, nanoseconds: 0),
                                ctime: FileTime(seconds: 1, nanoseconds: 0), owner: 0, links: 1)
        let dropped = EntryIdentity(path: "dropped.bin", size: 5, digests: [.sha256: "cd"])
        let adopted = EntryIdentity(path: "found.bin", size: 5, digests: [.sha256: "ef"])
        let gone = EntryIdentity(path: "gone.bin", size: 5, digests: [.sha256: "aa"])
        let stale = EntryIdentity(path: identity.path, size: 5, digests: [.sha256: "00"])
        try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: dropped, status: status)), durable: false)
        try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: adopted, status: status, adopted: true)), durable: false)
        try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: gone, status: status)), durable: false)
        try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: stale, status: status)), durable: false)
        try JournalWriter(journal).setUp(.removed(path: "gone.bin"), durable: true)
        #expect(journal.records(for: "gone.bin") == nil)
        #expect(journal.verifiedCount == 3)

        try JournalWriter(journal).compact(current: current(identity))
        let reopened = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
        #expect(reopened.records(for: "dropped.bin")?.verified?.identity == dropped)
        #expect(reopened.records(for: "found.bin")?.verified?.adopted == true)
        #expect(reopened.records(for: "dropped.bin")?.verified?.adopted == false)
        #expect(reopened.records(for: "gone.bin") == nil)
        #expect(reopened.records(for: identity.path) == nil, "an obsolete record of a listed path is dropped")
        #expect(JournalRecord.decode(ArraySlice(JournalRecord.removed(path: "a b").encodedLine().dropLast())) == .removed(path: "a b"))
    }

    @Test func compactionKeepsOnlyCurrentEntriesAndShrinks() throws {
        let dir = try TemporaryDirectory()
        let other = EntryIdentity(path: "old.bin", size: 5, digests: [.sha256: "cd"])
        let journal = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
        for i in 1...400 { try JournalWriter(journal).setUp(partial(Int64(i)), durable: false) }
        try JournalWriter(journal).setUp(.partial(PartialRecord(identity: other, url: "u", validator: nil, bytes: 3)), durable: false)
        try JournalWriter(journal).setUp(.run(RunRecord(start: 1, end: 2, result: "ok", downloaded: 0, failed: 0, bytes: 0)), durable: true)
        #expect(journal.needsCompaction(liveEntries: 1))
        let before = try journalBytes(dir).count

        try JournalWriter(journal).compact(current: current(identity))
        let after = try journalBytes(dir).count
        #expect(after < before / 50)
        #expect(journal.records(for: "old.bin") == nil)
        #expect(journal.needsCompaction(liveEntries: 1) == false)
        #expect(access(dir.path("journal.tmp"), F_OK) != 0)

        let reopened = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: false)
        #expect(reopened.records(for: identity.path)?.partial?.bytes == 400)
        #expect(reopened.lastRun?.result == "ok")
        // Appends after compaction land in the new file.
        try JournalWriter(reopened).setUp(partial(401), durable: true)
        let third = try Journal(folder: try openFolder(dir), displayPath: "journal", readOnly: true)
        #expect(third.records(for: identity.path)?.partial?.bytes == 401)
    }

    @Test func aRecordForAnotherSizeOrChecksumIsAnotherIdentity() {
        var changed = identity
        changed.size += 1
        #expect(changed != identity)
        var resummed = identity
        resummed.digests[.sha256] = String(repeating: "cd", count: 32)
        #expect(resummed != identity)
    }
}
