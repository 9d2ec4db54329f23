@testable import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Cheap resume: a checkpoint journals the hash state at exactly its length, and a resume from
/// that length continues the hash without reading the prefix; anything else re-reads it.
@Suite struct PartialFileTests {
    let fx: PartialFolder
    var dir: TemporaryDirectory { fx.dir }
    var folder: FileDescriptor { fx.folder }
    var journal: Journal { fx.journal }

    init() throws { fx = try PartialFolder() }

    static let content = TestData.bytes(count: 12 << 20, seed: 77)
    static let identity = EntryIdentity(path: "big.bin", size: Int64(content.count),
                                        digests: [.sha256: TestData.sha256(of: content),
                                                  .sha512: Hasher.digest(.sha512, of: content).hex])

    /// Appends in 1 MiB pieces, as a transfer would (checkpoints fall at the first piece that
    /// crosses each 8 MiB).
    func append(_ file: PartialFile, _ range: Range<Int>, piece: Int = 1 << 20) throws {
        var start = range.lowerBound
        while start < range.upperBound {
            let end = min(range.upperBound, start + piece)
            try Self.content[start..<end].withUnsafeBytes { try file.append($0) }
            start = end
        }
    }

    @Test func hashStateRoundTripsAndIsRefusedWhenForeign() {
        let a = Hasher(.sha256)
        a.update(Array(Self.content[0..<1000]))
        let state = a.exportState()
        let b = Hasher(.sha256)
        #expect(b.restore(state))
        a.update(Array(Self.content[1000..<2000]))
        b.update(Array(Self.content[1000..<2000]))
        #expect(a.finalize() == b.finalize())
        #expect(Hasher(.sha512).restore(state) == false, "a SHA-256 state is not a SHA-512 state")
        var damaged = state
        damaged[3] ^= 1  // the libcrypto version in the tag
        #expect(Hasher(.sha256).restore(damaged) == false)
    }

    @Test func aResumeFromTheCheckpointUsesTheSavedStateAndStillVerifies() throws {
        let first = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal))
        first.sourceURL = "http://127.0.0.1/big.bin"
        try append(first, 0..<(9 << 20))  // passes the 8 MiB checkpoint
        #expect(journal.records(for: "big.bin")?.partial?.bytes == 8 << 20)
        try append(first, (9 << 20)..<(10 << 20))
        first.checkpoint()  // as a clean stop does: nothing is written after it
        let record = try #require(journal.records(for: "big.bin")?.partial)
        #expect(record.bytes == 10 << 20)
        #expect(record.hashStates[.sha256] != nil && record.hashStates[.sha512] != nil)
        first.close()

        let resumed = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal),
                                      resumeFrom: record.bytes, saved: record)
        #expect(resumed.resumedFromSavedState)
        #expect(resumed.length == record.bytes)
        try append(resumed, Int(record.bytes)..<Self.content.count)
        let digests = try resumed.finishDigests()
        #expect(digests[.sha256]?.hex == Self.identity.digests[.sha256])
        #expect(digests[.sha512]?.hex == Self.identity.digests[.sha512])
    }

    /// A run killed after a checkpoint had written past it (which moves the file's change time):
    /// the saved state is restored all the same, what follows the checkpoint is cut, and the
    /// prefix is not read again (docs/journal.md, rule 8).
    @Test func aFileWrittenPastItsCheckpointResumesFromTheSavedState() throws {
        let first = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal))
        first.sourceURL = "http://127.0.0.1/big.bin"
        try append(first, 0..<(8 << 20))
        let record = try #require(journal.records(for: "big.bin")?.partial)
        #expect(record.bytes == 8 << 20 && record.fileInode != nil && record.fileChangeTime != nil)
        let checkpointed = try #require(record.fileChangeTime)
        try FileClock.waitUntilPast(timespec(tv_sec: Int(checkpointed.seconds), tv_nsec: Int(checkpointed.nanoseconds)))
        try append(first, (8 << 20)..<(10 << 20))  // not checkpointed: then the kill
        #expect(try first.file.stat().ctime != record.fileChangeTime)
        first.close()

        let resumed = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal),
                                      resumeFrom: record.bytes, saved: record)
        #expect(resumed.resumedFromSavedState)
        #expect(resumed.rehashedAtResume == 0 && resumed.keptAtResume == record.bytes)
        #expect(try resumed.file.stat().size == record.bytes, "the bytes past the checkpoint are cut")
        try append(resumed, Int(record.bytes)..<Self.content.count)
        let digests = try resumed.finishDigests()
        #expect(digests[.sha256]?.hex == Self.identity.digests[.sha256])
        #expect(digests[.sha512]?.hex == Self.identity.digests[.sha512])
    }

    /// The limit of the rule, pinned: the durable prefix overwritten in place (same inode, owner,
    /// mode) by this user is not read again. The saved state is restored, so the digest is that of
    /// the bytes as they were fetched, not of the file (docs/journal.md, rule 8; `mirror verify`
    /// reads the file).
    @Test func aPrefixChangedInPlaceIsNotReadAgain() throws {
        let first = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal))
        first.sourceURL = "http://127.0.0.1/big.bin"
        try append(first, 0..<(9 << 20))
        let record = try #require(journal.records(for: "big.bin")?.partial)
        try [UInt8](repeating: 0xEE, count: 4096).withUnsafeBytes { try first.file.write($0, at: 100) }
        first.close()

        let resumed = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal),
                                      resumeFrom: record.bytes, saved: record)
        #expect(resumed.resumedFromSavedState)
        try append(resumed, Int(record.bytes)..<Self.content.count)
        #expect(try resumed.finishDigests()[.sha256]?.hex == Self.identity.digests[.sha256], "the digest of the bytes as fetched")
        #expect(TestData.sha256(of: Array(try resumed.file.readAll())) != Self.identity.digests[.sha256], "not of the file")
    }

    /// The saved state describes one inode, this user's, mode 0600, one name, at least as long.
    @Test func aRecordDescribesOnlyItsOwnFileAtLeastAsLong() throws {
        let record = PartialRecord(identity: Self.identity, url: "http://127.0.0.1/big.bin", validator: nil, bytes: 100,
                                   hashStates: [.sha256: "00"], fileInode: 7, fileChangeTime: FileTime(seconds: 5, nanoseconds: 0))
        let me = geteuid()
        let file = FileStatus(size: 100, mode: UInt32(S_IFREG) | 0o600, inode: 7, device: 1, mtime: FileTime(seconds: 5, nanoseconds: 0),
                              ctime: FileTime(seconds: 9, nanoseconds: 0), owner: me, links: 1)
        #expect(record.describes(file, owner: me), "another change time: written past the checkpoint")
        var other = file
        other.inode = 8
        #expect(!record.describes(other, owner: me))
        other = file
        other.size = 99
        #expect(!record.describes(other, owner: me))
        other = file
        other.links = 2
        #expect(!record.describes(other, owner: me))
        other = file
        other.mode = UInt32(S_IFREG) | 0o644
        #expect(!record.describes(other, owner: me))
        #expect(!record.describes(file, owner: me &+ 1))
        var old = record
        old.fileInode = nil
        old.fileChangeTime = nil
        #expect(!old.describes(file, owner: me), "a record of an older version")
    }

    /// With the writer thread, a prefix hashed again is read from the file while new bytes are
    /// hashed from the file after it (the transfer does not wait behind the read): same digests,
    /// and checkpoints still record a hash state of exactly their length.
    @Test func aPrefixHashedAgainOnTheWriterThreadGivesTheRightDigests() throws {
        let first = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal))
        first.sourceURL = "http://127.0.0.1/big.bin"
        try append(first, 0..<(9 << 20))
        let record = try #require(journal.records(for: "big.bin")?.partial)
        first.close()
        // A record of an older version, without the file's inode: the state is not trusted.
        var untrusted = record
        untrusted.fileInode = nil
        untrusted.fileChangeTime = nil

        let writer = PartialWriter()
        defer { writer.shutdown() }
        let resumed = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal),
                                      writer: writer, resumeFrom: record.bytes, saved: untrusted)
        resumed.sourceURL = "http://127.0.0.1/big.bin"
        #expect(!resumed.resumedFromSavedState)
        try append(resumed, Int(record.bytes)..<(11 << 20), piece: 300_007)
        resumed.checkpoint()
        resumed.settle()
        let mid = try #require(journal.records(for: "big.bin")?.partial)
        #expect(mid.bytes == 11 << 20 && mid.hashStates[.sha256] != nil, "\(mid.bytes)")
        try append(resumed, (11 << 20)..<Self.content.count, piece: 300_007)
        let digests = try resumed.finishDigests()
        #expect(digests[.sha256]?.hex == Self.identity.digests[.sha256])
        #expect(digests[.sha512]?.hex == Self.identity.digests[.sha512])
    }

    /// 8 MiB of a download, journaled, its file's mode then set to `mode` and the file closed, as
    /// a run that stopped leaves it; then opened again to resume from its record.
    func reopened(afterChmod mode: mode_t) throws -> (PartialFile, PartialRecord) {
        let first = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal))
        first.sourceURL = "http://127.0.0.1/big.bin"
        try append(first, 0..<(8 << 20))
        let record = try #require(journal.records(for: "big.bin")?.partial)
        #expect(fchmod(first.file.fd, mode) == 0)
        first.close()
        let again = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal),
                                    resumeFrom: record.bytes, saved: record)
        return (again, record)
    }

    /// A partial file that is not this process's own, mode 0600, is never resumed: a new file
    /// takes its name.
    @Test func aPartialWithAnotherModeIsReplacedNotResumed() throws {
        let (again, _) = try reopened(afterChmod: 0o666)
        #expect(again.length == 0)
        #expect(journal.records(for: "big.bin")?.partial == nil, "the journal forgot the old file first")
    }

    /// The Installer seals a verified file with the manifest's mode before the rename; a power
    /// cut (or a kill) between the two leaves it in `partial/` with that mode. It is still this
    /// user's own file that nobody else may write: set back to 0600 and resumed, not fetched again
    /// (found by CrashStateTests.resumedSegmentedLargeFile).
    @Test func aPartialSealedForInstallIsResumed() throws {
        let (again, record) = try reopened(afterChmod: 0o644)
        #expect(again.length == record.bytes)
        #expect(try again.file.stat().permissions == 0o600)
        #expect(again.resumedFromSavedState, "the same inode: its saved hash state is restored")
        #expect(journal.records(for: "big.bin")?.partial != nil, "the journal kept its record")
    }

    @Test func aResumeFromElsewhereReadsThePrefixAgain() throws {
        let first = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal))
        first.sourceURL = "http://127.0.0.1/big.bin"
        try append(first, 0..<(9 << 20))
        let record = try #require(journal.records(for: "big.bin")?.partial)
        first.close()

        // The partial file was cut below the checkpoint: the saved state does not describe it.
        let resumed = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal),
                                      resumeFrom: 5 << 20, saved: record)
        #expect(!resumed.resumedFromSavedState)
        try append(resumed, (5 << 20)..<Self.content.count)
        #expect(try resumed.finishDigests()[.sha256]?.hex == Self.identity.digests[.sha256])
    }

    @Test func theWriterThreadProducesTheSameFileAndDigests() throws {
        let writer = PartialWriter()
        defer { writer.shutdown() }
        let file = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal), writer: writer)
        file.sourceURL = "http://127.0.0.1/big.bin"
        try append(file, 0..<3_000_000, piece: 100_003)
        file.restartFromZero()  // a 200 to a range request: the body starts over mid-stream
        try append(file, 0..<Self.content.count, piece: 77_777)
        let digests = try file.finishDigests()
        #expect(digests[.sha256]?.hex == Self.identity.digests[.sha256])
        #expect(TestData.sha256(of: Array(try file.file.readAll())) == Self.identity.digests[.sha256])
        let durable = journal.records(for: "big.bin")?.partial?.bytes ?? 0
        #expect(durable >= 8 << 20 && durable < (8 << 20) + 77_777, "checkpointed at \(durable)")
    }

    // The journal never vouches (with a saved hash state) for bytes that may since have changed.

    @Test func resumingBelowTheRecordReplacesTheRecordFirst() throws {
        let first = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal))
        first.sourceURL = "http://127.0.0.1/big.bin"
        try Self.content[0..<(9 << 20)].withUnsafeBytes { try first.append($0) }
        let record = try #require(journal.records(for: "big.bin")?.partial)
        first.close()

        _ = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal),
                            resumeFrom: 3 << 20, saved: record)
        let now = try #require(journal.records(for: "big.bin")?.partial)
        #expect(now.bytes == 3 << 20)
        #expect(now.hashStates[.sha256] == nil, "no state for the shorter prefix: a later resume re-reads it")
    }

    @Test func restartingFromZeroForgetsTheCheckpointBeforeTruncating() throws {
        let file = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal))
        file.sourceURL = "http://127.0.0.1/big.bin"
        try Self.content[0..<(9 << 20)].withUnsafeBytes { try file.append($0) }
        #expect(journal.records(for: "big.bin")?.partial != nil)
        file.restartFromZero()
        let reread = try Journal(folder: folder, displayPath: "journal", readOnly: true)
        #expect(reread.records(for: "big.bin")?.partial == nil)
    }
}
