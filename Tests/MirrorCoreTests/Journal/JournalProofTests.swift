import Foundation
import MirrorFS
@testable import MirrorState
import Testing
import MirrorTestSupport

/// A `verified` record or a hash-state checkpoint reaches the journal only with the proof its
/// sync returned (``Synced``), and only for the file that sync covered; a restatement only
/// repeats what the journal already vouches for (docs/journal.md, rule 1).
@Suite struct JournalProofTests {
    let fx: DestinationState
    var journal: Journal { fx.journal }
    var writer: JournalWriter { JournalWriter(fx.journal) }

    init() throws { fx = try DestinationState() }

    /// Writes `bytes` at `path` in DEST and returns the file, open.
    func file(_ path: String, _ bytes: String) throws -> FileDescriptor {
        try Data(bytes.utf8).write(to: URL(fileURLWithPath: fx.dir.path(path)))
        return try fx.destination.openForReading(path)
    }

    func record(_ path: String, _ status: FileStatus) -> VerifiedRecord {
        VerifiedRecord(identity: EntryIdentity(path: path, size: status.size, digests: [.sha256: String(repeating: "ab", count: 32)]),
                       status: status)
    }

    func reread() throws -> Journal { try Journal(folder: fx.state, displayPath: "journal", readOnly: true) }

    @Test func aFilesOwnSyncVouchesForItsRecordAndNoOtherFile() throws {
        let a = try file("a.bin", "alpha")
        let b = try file("b.bin", "bravo")
        let proofOfA = try a.syncData()
        // A proof of a's bytes shown with b's record: refused, nothing written.
        var refused = false
        do {
            try writer.append(verified: [record("b.bin", try b.stat())], proof: proofOfA)
        } catch is JournalWriter.Unproven {
            refused = true
        }
        #expect(refused)
        #expect(try reread().records(for: "b.bin")?.verified == nil)

        try writer.append(verified: [record("a.bin", try a.stat())], proof: try a.syncData())
        #expect(try reread().records(for: "a.bin")?.verified?.inode == (try a.stat()).inode)
    }

    @Test func oneSyncOfTheFileSystemVouchesForEachFileOnIt() throws {
        let files = try (0 ..< 3).map { try file("f\($0).bin", "file \($0)") }
        let records = try files.enumerated().map { record("f\($0.offset).bin", try $0.element.stat()) }
        try writer.append(verified: records, notes: [.removed(path: "gone.bin")], proof: try fx.partials.syncFilesystem())
        let reread = try reread()
        #expect((0 ..< 3).allSatisfy { reread.records(for: "f\($0).bin")?.verified != nil })
    }

    @Test func aCheckpointIsRefusedWithTheProofOfAnotherFile() throws {
        let a = try file("a.bin", "alpha")
        let partial = try file("p.bin", "partial bytes")
        let status = try partial.stat()
        let record = PartialRecord(identity: EntryIdentity(path: "p.bin", size: 100, digests: [.sha256: String(repeating: "ab", count: 32)]),
                                   url: "http://h/p", validator: nil, bytes: 13, hashStates: [.sha256: "00"],
                                   fileInode: status.inode, fileChangeTime: status.ctime)
        #expect(throws: JournalWriter.Unproven.self) { try writer.append(checkpoint: record, proof: try a.syncData()) }
        #expect(try reread().records(for: "p.bin")?.partial == nil)
        try writer.append(checkpoint: record, proof: try partial.syncData())
        #expect(try reread().records(for: "p.bin")?.partial?.hashStates[.sha256] == "00")
    }

    /// A link made or removed moves only the change time: the record may be written again without
    /// a sync. Another inode, size or modification time is not a restatement, and is refused.
    @Test func aRestatementRepeatsWhatTheJournalVouchesFor() throws {
        let a = try file("a.bin", "alpha")
        let before = try a.stat()
        try writer.append(verified: [record("a.bin", before)], proof: try a.syncData())

        var moved = before
        moved.ctime = FileTime(seconds: before.ctime.seconds + 5, nanoseconds: 0)
        try writer.restate([record("a.bin", moved)])
        #expect(try reread().records(for: "a.bin")?.verified?.ctime == moved.ctime)

        var written = moved
        written.mtime = FileTime(seconds: before.mtime.seconds + 5, nanoseconds: 0)
        #expect(throws: JournalWriter.Unproven.self) { try writer.restate([record("a.bin", written)]) }
        var other = moved
        other.inode &+= 1
        #expect(throws: JournalWriter.Unproven.self) { try writer.restate([record("a.bin", other)]) }
        #expect(throws: JournalWriter.Unproven.self) { try writer.restate([record("never-verified.bin", before)]) }
        #expect(try reread().records(for: "a.bin")?.verified?.ctime == moved.ctime)
    }
}
