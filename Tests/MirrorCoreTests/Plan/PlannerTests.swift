import MirrorModel
import MirrorState
import Testing
import MirrorCore
import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Planning decides from the disk and the journal alone; these tests use a real folder.
@Suite struct PlannerTests {
    let fx: DestinationState
    var dir: TemporaryDirectory { fx.dir }
    var destination: Destination { fx.destination }
    var state: FileDescriptor { fx.state }
    var partials: FileDescriptor { fx.partials }
    var journal: Journal { fx.journal }

    init() throws { fx = try DestinationState() }

    func write(_ relative: String, bytes: Int) throws {
        try TestData.bytes(count: bytes, seed: 1).withUnsafeBytes { raw in
            let path = dir.path(relative)
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            try #require(fd >= 0, "open \(path)")
            try FileDescriptor(fd: fd, displayPath: path).write(raw, at: 0)
        }
    }

    var planner: Planner { fx.planner }

    /// The no-op fast path compares the journal line in place; any difference in the entry or the
    /// file sends the entry down the full path (a check or a download), never to "up to date".
    @Test func theInPlaceVerifiedCheckAgreesWithTheRecord() throws {
        try write("a b=%.bin", bytes: 10)
        let e = ManifestEntry.fixture("a b=%.bin")
        let status = try #require(try destination.status(of: e.path))
        try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: EntryIdentity(e), status: status)), durable: false)
        #expect(journal.isVerified(e, status: status))
        #expect(try planner.action(for: e) == .upToDate)

        var other = status
        other.ctime = FileTime(seconds: status.ctime.seconds + 1, nanoseconds: status.ctime.nanoseconds)
        other.owner = UInt32(geteuid())
        #expect(journal.isVerified(e, status: other), "another ctime on this user's file nobody else may write: a link, a chown")
        other.mode |= 0o020
        #expect(!journal.isVerified(e, status: other), "another ctime on a file its group may write: touched")
        other.mode = status.mode
        other.owner = UInt32(geteuid()) &+ 1
        #expect(!journal.isVerified(e, status: other), "another ctime on another user's file: touched")
        other = status
        other.inode += 1
        #expect(!journal.isVerified(e, status: other), "another inode: another file")
        other = status
        other.mtime = FileTime(seconds: status.mtime.seconds, nanoseconds: status.mtime.nanoseconds + 1)
        #expect(!journal.isVerified(e, status: other))
        let resized = ManifestEntry.fixture("a b=%.bin", size: 11)
        #expect(!journal.isVerified(resized, status: status), "another size in the manifest")
        let rehashed = ManifestEntry.fixture(e.path, sha256: .filled(8))
        #expect(!journal.isVerified(rehashed, status: status), "another checksum in the manifest")
        #expect(try planner.action(for: rehashed) == .download(replacing: true), "the journal knows these are other bytes")
        #expect(!journal.isVerified(.fixture("a b=%.bi"), status: status), "a path that is a prefix")
    }

    @Test func missingFilesAreDownloaded() throws {
        #expect(try planner.action(for: .fixture("a.bin")) == .download(replacing: false))
        #expect(try planner.action(for: .fixture("deep/er/a.bin")) == .download(replacing: false))
    }

    @Test func presentFilesUnknownToTheJournalAreCheckedOrReplaced() throws {
        try write("same.bin", bytes: 10)
        try write("other.bin", bytes: 11)
        #expect(try planner.action(for: .fixture("same.bin")) == .check)
        #expect(try planner.action(for: .fixture("other.bin")) == .download(replacing: true))
    }

    @Test func aJournaledFileIsSkippedUntilSomebodyTouchesIt() throws {
        try write("a.bin", bytes: 10)
        let e = ManifestEntry.fixture("a.bin")
        let status = try #require(try destination.status(of: "a.bin"))
        try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: EntryIdentity(e), status: status)), durable: true)
        #expect(try planner.action(for: e) == .upToDate)

        // Any change of the file (here: its mtime) makes the record stale: hash it again.
        var times = [timespec(tv_sec: 0, tv_nsec: Int((1 << 30) - 2)), timespec(tv_sec: 12345, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, dir.path("a.bin"), &times, 0) == 0)
        #expect(try planner.action(for: e) == .check)
    }

    /// A record vouches only for this user's file with the entry's mode (``FoundFilePolicy``): a
    /// record that matches the file's `stat` (one written before this rule, for a file of another
    /// user's), or a manifest that now gives another mode, sends the entry to a check.
    @Test func aRecordDoesNotVouchForAFileOfAnotherOwnerOrMode() throws {
        try write("a.bin", bytes: 10)
        #expect(chmod(dir.path("a.bin"), 0o644) == 0)
        let e = ManifestEntry.fixture("a.bin")
        if geteuid() == 0 {
            #expect(chown(dir.path("a.bin"), 65534, 65534) == 0)
            let theirs = try #require(try destination.status(of: "a.bin"))
            try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: EntryIdentity(e), status: theirs)), durable: true)
            #expect(journal.isVerified(e, status: theirs), "the record matches the stat")
            #expect(try planner.action(for: e) == .check, "another user's file")
            #expect(chown(dir.path("a.bin"), 0, 0) == 0)
        }
        let ours = try #require(try destination.status(of: "a.bin"))
        try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: EntryIdentity(e), status: ours)), durable: true)
        #expect(try planner.action(for: e) == .upToDate)
        var executable = e
        executable.mode = 0o755
        #expect(try planner.action(for: executable) == .check, "the manifest gives another mode")
    }

    @Test func aRecordForAnOlderManifestEntryIsObsolete() throws {
        try write("a.bin", bytes: 10)
        let old = ManifestEntry.fixture("a.bin")
        let status = try #require(try destination.status(of: "a.bin"))
        try JournalWriter(journal).setUp(.verified(VerifiedRecord(identity: EntryIdentity(old), status: status)), durable: true)
        var changed = old
        changed.digests[.sha256] = Digest(bytes: [UInt8](repeating: 8, count: 32))
        #expect(try planner.action(for: changed) == .download(replacing: true),
                "same size, new checksum: never trusted, and known to be other bytes without hashing")
        var widened = old
        widened.digests[.sha512] = Digest(bytes: [UInt8](repeating: 9, count: 64))
        #expect(try planner.action(for: widened) == .check, "a digest added beside the same one: hashed, maybe kept")
    }

    @Test(arguments: [(held: 4000, recorded: 3000, expected: 3000), (held: 2000, recorded: 3000, expected: 2000)])
    func partialsResumeFromWhatIsBothDurableAndPresent(held: Int, recorded: Int64, expected: Int64) throws {
        let e = ManifestEntry.fixture("big.bin", size: 10_000)
        try write(".mirror/partial/" + PartialFile.name(for: e.path), bytes: held)
        let record = PartialRecord(identity: EntryIdentity(e), url: "http://127.0.0.1/big.bin", validator: "\"v\"", bytes: recorded)
        try JournalWriter(journal).setUp(.partial(record), durable: true)
        #expect(try planner.action(for: e) == .resume(from: expected, record: record))
    }

    @Test func aPartialWithoutAMatchingRecordIsNotTrusted() throws {
        let e = ManifestEntry.fixture("big.bin", size: 10_000)
        try write(".mirror/partial/" + PartialFile.name(for: e.path), bytes: 5000)
        #expect(try planner.action(for: e) == .download(replacing: false), "no record at all")
        var other = EntryIdentity(e)
        other.size = 20_000
        try JournalWriter(journal).setUp(.partial(PartialRecord(identity: other, url: "u", validator: nil, bytes: 5000)), durable: true)
        #expect(try planner.action(for: e) == .download(replacing: false), "a record for another size")
    }

    @Test func foldersAndSymlinksAtAPathBlockTheEntry() throws {
        #expect(mkdir(dir.path("folder"), 0o755) == 0)
        #expect(symlink("/etc/passwd", dir.path("link")) == 0)
        guard case .blocked(let why) = try planner.action(for: .fixture("folder")) else {
            Issue.record("a folder at the path was not reported"); return
        }
        #expect(why.contains("folder"))
        guard case .blocked(let linkWhy) = try planner.action(for: .fixture("link")) else {
            Issue.record("a symlink at the path was not reported"); return
        }
        #expect(linkWhy.contains("symbolic link"))
    }
}
