@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The hand-off from a transfer thread to a hashing thread (``PartialWriter``, ``WriterWakes``):
/// libcurl's 16 KiB pieces of one turn become one job per buffer, and still reach the hash in file
/// order, with every checkpoint recording exactly the bytes queued before it.
@Suite struct WriterWakesTests {
    let fx: PartialFolder
    var dir: TemporaryDirectory { fx.dir }
    var folder: FileDescriptor { fx.folder }
    var journal: Journal { fx.journal }

    init() throws { fx = try PartialFolder() }

    static let content = TestData.bytes(count: 10 << 20, seed: 91)
    static let identity = EntryIdentity(path: "big.bin", size: Int64(content.count),
                                        digests: [.sha256: TestData.sha256(of: content)])
    static let piece = 16 << 10

    func file(_ writer: PartialWriter) throws -> PartialFile {
        let file = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal), writer: writer)
        file.sourceURL = "http://127.0.0.1/big.bin"
        return file
    }

    /// Appends `range` in libcurl's pieces, `perTurn` of them in each turn of a transfer loop.
    func append(_ file: PartialFile, _ range: Range<Int>, perTurn: Int, wakes: WriterWakes) throws {
        var start = range.lowerBound
        while start < range.upperBound {
            try wakes.deferring {
                for _ in 0 ..< perTurn where start < range.upperBound {
                    let end = min(range.upperBound, start + Self.piece)
                    try Self.content[start ..< end].withUnsafeBytes { try file.append($0) }
                    start = end
                }
            }
        }
    }

    /// Sixteen pieces in one turn fill one 256 KiB buffer: one job, where each piece was a job and
    /// a wake of its own. (The writer may take the first piece before the second comes, if it
    /// was still awake from the warm-up: at most two.)
    @Test func piecesOfOneTurnBecomeOneJob() throws {
        let writer = PartialWriter()
        defer { writer.shutdown() }
        let file = try file(writer)
        let wakes = WriterWakes()
        try append(file, 0 ..< Self.piece, perTurn: 1, wakes: wakes)  // the thread is up and waiting
        file.settle()
        let before = writer.jobsTaken
        try append(file, Self.piece ..< 17 * Self.piece, perTurn: 16, wakes: wakes)
        file.settle()
        #expect(writer.jobsTaken - before <= 2, "\(writer.jobsTaken - before) jobs for 16 pieces of one turn")
    }

    /// Whatever the turns, the digest is the file's, and the checkpoint at 8 MiB (queued in the
    /// middle of a turn) records exactly 8 MiB: no later piece joined a hash job queued before it.
    @Test func aCheckpointInATurnRecordsExactlyTheBytesBeforeIt() throws {
        for perTurn in [1, 5, 13, 40] {
            let writer = PartialWriter()
            defer { writer.shutdown() }
            let file = try file(writer)
            try append(file, 0 ..< Self.content.count, perTurn: perTurn, wakes: WriterWakes())
            file.settle()
            #expect(journal.records(for: "big.bin")?.partial?.bytes == 8 << 20, "\(perTurn) pieces a turn")
            #expect(try file.finishDigests()[.sha256]?.hex == Self.identity.digests[.sha256], "\(perTurn) pieces a turn")
        }
    }

    /// A turn that owes a wake and then waits for the writer never waits for ever: one piece for
    /// each of more files than the writer has buffers, in one turn, so every buffer is in a job
    /// with room left that nothing woke the writer for when the next file asks for a buffer.
    @Test func aTurnThatRunsOutOfBuffersPaysItsWakes() throws {
        let writer = PartialWriter()
        defer { writer.shutdown() }
        let files = try (0 ... PartialWriter.bufferCount).map { i in
            let identity = EntryIdentity(path: "f\(i).bin", size: Int64(Self.content.count), digests: Self.identity.digests)
            return try PartialFile(identity: identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal), writer: writer)
        }
        // The writer thread runs, hashes a piece, and goes to sleep (its idle clock runs: it waits).
        try Self.content[0 ..< Self.piece].withUnsafeBytes { try files[0].append($0) }
        files[0].settle()
        try Wait.until("the writer thread waits for work", timeout: 10) {
            let before = writer.idleSeconds
            return writer.idleSeconds > before
        }
        // On a thread of its own, so that a lost wake fails the test instead of hanging it. The
        // files are lent to it: this thread waits for it before touching them.
        let finished = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let lentFiles = files
        let turn = Thread {
            try? WriterWakes().deferring {
                for file in lentFiles {
                    try Self.content[file === lentFiles[0] ? Self.piece ..< 2 * Self.piece : 0 ..< Self.piece].withUnsafeBytes { try file.append($0) }
                }
            }
            for file in lentFiles { file.settle() }
            finished.signal()
        }
        turn.start()
        try #require(finished.wait(timeout: .now() + 30) == .success, "the turn waited for a buffer that no wake would free")
        #expect(writer.jobsTaken == files.count + 1)
    }
}
