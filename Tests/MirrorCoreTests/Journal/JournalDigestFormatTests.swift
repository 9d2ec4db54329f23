@testable import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The journal's digest fields are written and read from the algorithm list, and must stay the
/// bytes earlier versions wrote (`sha256=`, `sha512=`, `h256=`, `h512=`, in that order), so that
/// existing journals keep working. The lines below were written out by hand from the format
/// (docs/journal.md) with their CRC-32s computed separately.
@Suite struct JournalDigestFormatTests {
    static let sha256 = String(repeating: "ab", count: 32)
    static let sha512 = String(repeating: "cd", count: 64)
    static let both = EntryIdentity(path: "a b/c.bin", size: 3, digests: [.sha256: sha256, .sha512: sha512])

    static let verifiedLine = "462f2dcc verified path=a%20b/c.bin size=3 sha256=\(sha256) sha512=\(sha512) "
        + "ino=7 dev=9 mtime=5.000000006 ctime=7.000000008\n"
    static let partialLine = "3137ecab partial path=a%20b/c.bin size=3 sha256=\(sha256) sha512=\(sha512) "
        + "url=http://h/x validator=\"e%201\" bytes=2 h256=0102 h512=0304 segs=0:2:2,2:3:0 ino=11 ctime=12.000000013\n"
    static let failedLine = "3cf71528 failed path=z size=1 sha512=\(sha512) error=boom%20now at=99\n"

    static let status = FileStatus(size: 3, mode: 0o100644, inode: 7, device: 9,
                                   mtime: FileTime(seconds: 5, nanoseconds: 6), ctime: FileTime(seconds: 7, nanoseconds: 8))

    static let records: [(JournalRecord, String)] = [
        (.verified(VerifiedRecord(identity: both, status: status)), verifiedLine),
        (.partial(PartialRecord(identity: both, url: "http://h/x", validator: "\"e 1\"", bytes: 2,
                                hashStates: [.sha256: "0102", .sha512: "0304"],
                                segments: [SegmentRecord(start: 0, end: 2, done: 2), SegmentRecord(start: 2, end: 3, done: 0)],
                                fileInode: 11, fileChangeTime: FileTime(seconds: 12, nanoseconds: 13))), partialLine),
        (.failed(FailedRecord(identity: EntryIdentity(path: "z", size: 1, digests: [.sha512: sha512]), error: "boom now", time: 99)),
         failedLine),
    ]

    @Test func checksumsAreEightLowercaseDigitsWithLeadingZeros() {
        #expect(JournalRecord.hex8(0) == "00000000")
        #expect(JournalRecord.hex8(0xabcd) == "0000abcd")
        #expect(JournalRecord.hex8(0xFEDC_BA98) == "fedcba98")
    }

    @Test func linesAreTheBytesEarlierVersionsWrote() {
        for (record, line) in Self.records {
            #expect(String(decoding: record.encodedLine(), as: UTF8.self) == line)
        }
    }

    @Test func linesOfEarlierVersionsDecodeToTheSameRecords() {
        for (record, line) in Self.records {
            #expect(JournalRecord.decode(Array(line.utf8.dropLast())[...]) == record, "\(line)")
        }
    }

    /// Hash states come back per algorithm; one missing state is simply absent.
    @Test func hashStatesAreKeptPerAlgorithm() throws {
        let line = Self.partialLine.replacingOccurrences(of: " h512=0304", with: "")
        let body = String(line.dropFirst(9).dropLast())
        let fixed = JournalRecord.hex8(JournalRecord.checksum(Array(body.utf8))) + " " + body
        guard case .partial(let r)? = JournalRecord.decode(Array(fixed.utf8)[...]) else {
            Issue.record("the line does not decode")
            return
        }
        #expect(r.hashStates[.sha256] == "0102")
        #expect(r.hashStates[.sha512] == nil)
        #expect(r.identity == Self.both)
    }

    /// The no-op path compares every digest the entry lists, on the packed record's bytes.
    @Test func theNoOpCompareChecksEveryListedDigest() throws {
        let journal = try Self.journal(with: Self.verifiedLine)
        func matches(_ digests: DigestSet, status: FileStatus = Self.status) -> Bool {
            journal.isVerified(ManifestEntry(path: "a b/c.bin", url: .relative("a%20b/c.bin"), size: 3, digests: digests), status: status)
        }
        let d256 = try #require(Digest(hex: Self.sha256, byteCount: 32))
        let d512 = try #require(Digest(hex: Self.sha512, byteCount: 64))
        let other512 = Digest(bytes: d512.bytes.dropLast() + [0])
        #expect(matches([.sha256: d256, .sha512: d512]))
        #expect(!matches([.sha256: d256, .sha512: other512]), "a differing sha512 is another file")
        #expect(!matches([.sha256: d256]), "an entry that lists fewer digests is another identity")
        #expect(!matches([.sha512: d512]))
        var moved = Self.status
        moved.ctime = FileTime(seconds: 7, nanoseconds: 9)
        // Another user's file: a moved change time is not allowed (``ChangeTimeTrust``).
        moved.owner = UInt32(geteuid()) &+ 1
        #expect(!matches([.sha256: d256, .sha512: d512], status: moved))
    }

    /// A read-only journal holding `lines` after the header.
    static func journal(with lines: String) throws -> Journal {
        let dir = try TemporaryDirectory()
        let fd = open(dir.path, O_RDONLY | O_DIRECTORY)
        try #require(fd >= 0)
        let folder = FileDescriptor(fd: fd, displayPath: dir.path)
        let file = open(dir.path(Journal.fileName), O_WRONLY | O_CREAT | O_EXCL, 0o644)
        try #require(file >= 0)
        try FileDescriptor(fd: file, displayPath: "journal").append(Array(("mirror-journal 1\n" + lines).utf8))
        return try Journal(folder: folder, displayPath: "journal", readOnly: true)
    }

    /// `body` under a fresh CRC: a line as `decode` reads it.
    static func line(_ body: String) -> String {
        JournalRecord.hex8(JournalRecord.checksum(Array(body.utf8))) + " " + body + "\n"
    }

    /// Opening the journal packs verified lines without decoding them; what a lookup returns must
    /// be what `decode` makes of the line, for lines written the usual way and for odd ones
    /// (fields in another order, an unknown key, digests in upper case, a bad field).
    @Test func packedRecordsAreWhatDecodeReads() throws {
        let bodies = [
            "verified path=a%20b/c.bin size=3 sha256=\(Self.sha256) ino=7 dev=9 mtime=5.000000006 ctime=7.000000008 found=1",
            "verified path=x%25y size=0 sha512=\(Self.sha512) sha256=\(Self.sha256) ino=18446744073709551615 dev=0 mtime=0.000000000 ctime=1.999999999 new=key",
            "verified path=up size=3 sha256=\(Self.sha256.uppercased()) ino=7 dev=9 mtime=5.000000006 ctime=7.000000008",
            "verified size=3 path=late sha256=\(Self.sha256) ino=7 dev=9 mtime=5.000000006 ctime=7.000000008",
        ]
        let journal = try Self.journal(with: bodies.map(Self.line).joined())
        for body in bodies {
            guard case .verified(let expected)? = JournalRecord.decode(Array(Self.line(body).utf8.dropLast())[...]) else {
                Issue.record("\(body) does not decode")
                continue
            }
            #expect(journal.records(for: expected.identity.path)?.verified == expected, "\(body)")
        }
        let upper = try #require(journal.records(for: "up")?.verified)
        let entry = ManifestEntry(path: "up", url: .relative("up"), size: 3, digests: [.sha256: try #require(Digest(hex: Self.sha256, byteCount: 32))])
        #expect(!journal.isVerified(entry, status: Self.status), "a digest not written in lower case vouches for no entry")
        #expect(upper.identity != EntryIdentity(entry))

        // A later line for a path that decode refuses (a bad mtime) leaves the path without a record.
        let bad = try Self.journal(with: Self.verifiedLine + Self.line("verified path=a%20b/c.bin size=3 sha256=\(Self.sha256) ino=7 dev=9 mtime=5 ctime=7.000000008"))
        #expect(bad.records(for: "a b/c.bin") == nil)
    }

    /// An existing journal with both digests vouches for its file through the public lookup.
    @Test func anEarlierJournalStillVouches() throws {
        let dir = try TemporaryDirectory()
        let fd = open(dir.path, O_RDONLY | O_DIRECTORY)
        try #require(fd >= 0)
        let folder = FileDescriptor(fd: fd, displayPath: dir.path)
        let file = open(dir.path(Journal.fileName), O_WRONLY | O_CREAT | O_EXCL, 0o644)
        try #require(file >= 0)
        try FileDescriptor(fd: file, displayPath: "journal").append(Array(("mirror-journal 1\n" + Self.verifiedLine).utf8))
        let journal = try Journal(folder: folder, displayPath: "journal", readOnly: true)
        let entry = ManifestEntry(path: "a b/c.bin", url: .relative("a%20b/c.bin"), size: 3,
                                  digests: [.sha256: try #require(Digest(hex: Self.sha256, byteCount: 32)),
                                            .sha512: try #require(Digest(hex: Self.sha512, byteCount: 64))])
        #expect(journal.isVerified(entry, status: Self.status))
        #expect(journal.records(for: "a b/c.bin")?.verified?.identity == EntryIdentity(entry))
    }
}
