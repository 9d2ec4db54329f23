import Foundation
import MirrorState
import Testing
import MirrorCore
import MirrorFS
import MirrorTestSupport

/// A run killed (SIGKILL) after a checkpoint was journaled resumes from the saved hash state
/// without reading the durable prefix again, even though it wrote past the checkpoint before it
/// died (docs/journal.md, rule 8): the rerun's `--json` says how many kept bytes it read back
/// (`resumed.rehashed_bytes`). Whatever the saved state vouches for, the final digest decides: a
/// prefix changed in place is caught and the file is fetched again from zero; a file that is not
/// the one the record was written for is hashed again, or not resumed at all.
@Suite(.serialized) struct TrustedResumeTests {
    static let size: Int64 = 40 << 20

    /// One stream of `big.bin` (40 MiB at 16 MiB/s), killed once a checkpoint of at least 8 MiB
    /// is journaled and the file holds more than 1 MiB past it: the run wrote after the checkpoint.
    /// Returns the fixture, the file's sha256 and the journal's last partial record.
    func killAfterACheckpoint() throws -> (SyncFixture, String, PartialRecord) {
        let fx = try SyncFixture(nginx: .init(limitRate: "16m"))
        let sha = try fx.addFile("big.bin", size: Self.size, seed: 91)
        try fx.writeManifest()
        let victim = try fx.startSync(["--segments", "1"])
        let partial = fx.destPath(".mirror/partial/" + PartialFile.name(for: "big.bin"))
        // Wait on the journal, not on a clock: a checkpoint recorded with its hash state, and the
        // file 1 to 6 MiB past it (well before the next one, every 8 MiB).
        try Wait.until("big.bin is 1 to 6 MiB past a checkpoint of 8 MiB or more, or the run ended", timeout: 60) {
            guard victim.isRunning else { return true }
            guard let record = try partialRecord(fx), record.bytes >= 8 << 20, record.hashStates[.sha256] != nil else { return false }
            let past = fx.size(of: partial) - record.bytes
            return past >= 1 << 20 && past <= 6 << 20
        }
        victim.signal(SIGKILL)
        _ = try victim.wait(timeout: 30)
        let record = try #require(try partialRecord(fx), "the killed run journaled a checkpoint")
        try #require(record.hashStates[.sha256] != nil && record.fileInode != nil)
        try #require(fx.size(of: partial) > record.bytes, "the killed run wrote past its last checkpoint")
        return (fx, sha, record)
    }

    func partialRecord(_ fx: SyncFixture) throws -> PartialRecord? {
        let fd = open(fx.destPath(".mirror"), O_RDONLY | O_DIRECTORY)
        guard fd >= 0 else { return nil }
        let journal = try Journal(folder: FileDescriptor(fd: fd, displayPath: ".mirror"), displayPath: "journal", readOnly: true)
        return journal.partialRecord(for: "big.bin")
    }

    /// Reruns with `--json` and returns its document, after checking the file ends correct and a
    /// third run has nothing to do.
    func rerun(_ fx: SyncFixture, sha: String) throws -> SyncDocument {
        let result = try fx.sync(["--segments", "1", "--json"])
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("big.bin")) == sha)
        let document = try JSONOutput.makeDecoder().decode(SyncDocument.self, from: Data(result.stdout.utf8))
        let third = try fx.sync()
        #expect(third.exitCode == 0 && third.stdout.isEmpty, "\(third)")
        return document
    }

    func changeTime(_ path: String) -> FileTime? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return FileTime(seconds: Int64(st.st_ctim.tv_sec), nanoseconds: Int64(st.st_ctim.tv_nsec))
    }

    var partialName: String { ".mirror/partial/" + PartialFile.name(for: "big.bin") }

    @Test func aKilledDownloadResumesWithoutReadingItsDurablePrefixAgain() throws {
        let (fx, sha, record) = try killAfterACheckpoint()
        let before = try fx.requestsSoFar().count
        let document = try rerun(fx, sha: sha)
        let resumed = try #require(document.resumed, "\(document)")
        #expect(resumed.files == 1 && resumed.bytes == record.bytes, "\(resumed)")
        #expect(resumed.rehashedBytes == 0, "the durable prefix was read back: \(resumed)")
        // The bytes past the checkpoint were cut, and the transfer asked for the rest only.
        let big = try fx.requests(atLeast: before + 1).dropFirst(before).filter { $0.uri == "/big.bin" }
        #expect(big.count == 1 && big.first?.rangeHeader == "bytes=\(record.bytes)-", "\(big)")
    }

    /// Segmented (`--segments 4`): killed after a checkpoint journaled every segment's durable
    /// part, the rerun restores the state for the prefix it covers and reads back only the other
    /// segments' durable bytes (SHA-2 takes bytes in file order); each segment asks for the rest.
    @Test func aKilledSegmentedDownloadReadsBackOnlyWhatTheStateDoesNotCover() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "8m"))
        let sha = try fx.addFile("big.bin", size: Self.size, seed: 92)
        try fx.writeManifest()
        let flags = ["--segments", "4", "--segments-above", "1M"]
        let victim = try fx.startSync(flags)
        // A checkpoint with a hash state, and the file written since (its change time moved).
        try Wait.until("big.bin was written after a segmented checkpoint, or the run ended", timeout: 60) {
            guard victim.isRunning else { return true }
            guard let record = try partialRecord(fx), record.segments != nil, record.bytes > 0, record.hashStates[.sha256] != nil,
                  let written = changeTime(fx.destPath(partialName)) else { return false }
            return written != record.fileChangeTime
        }
        victim.signal(SIGKILL)
        _ = try victim.wait(timeout: 30)
        let record = try #require(try partialRecord(fx))
        let segments = try #require(record.segments)
        try #require(changeTime(fx.destPath(partialName)) != record.fileChangeTime, "the killed run wrote past its checkpoint")
        let before = try fx.requestsSoFar().count
        let result = try fx.sync(flags + ["--json"])
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("big.bin")) == sha)
        let document = try JSONOutput.makeDecoder().decode(SyncDocument.self, from: Data(result.stdout.utf8))
        let resumed = try #require(document.resumed, "\(document)")
        #expect(resumed.bytes == record.durableBytes && resumed.rehashedBytes == record.durableBytes - record.bytes, "\(resumed), \(record)")
        let asked = Set(try fx.requests(atLeast: before + 1).dropFirst(before).filter { $0.uri == "/big.bin" }.compactMap(\.rangeHeader))
        for segment in segments where segment.done < segment.end - segment.start {
            #expect(asked.contains { $0.hasPrefix("bytes=\(segment.start + segment.done)-") }, "\(asked)")
        }
    }

    /// The limit of the rule, pinned (docs/journal.md, rule 8): the durable prefix overwritten in
    /// place by this user (same inode, owner, mode, links and length) is not read again, so the
    /// sync's digest, of the bytes as fetched, does not see it; `mirror verify` reads the file and
    /// reports it. A wrong digest at the end is otherwise fetched again from zero, once
    /// (``aWrongDigestAfterATrustedResumeIsFetchedAgainOnce()``).
    @Test func aPrefixChangedInPlaceIsNotReadAgainAndVerifyFindsIt() throws {
        let (fx, sha, record) = try killAfterACheckpoint()
        let fd = open(fx.destPath(partialName), O_WRONLY)
        try #require(fd >= 0)
        let junk = [UInt8](repeating: 0xA5, count: 4096)
        #expect(junk.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(1 << 20)) } == 4096)
        close(fd)
        let result = try fx.sync(["--segments", "1", "--json"])
        #expect(result.exitCode == 0, "\(result)")
        let document = try JSONOutput.makeDecoder().decode(SyncDocument.self, from: Data(result.stdout.utf8))
        #expect(document.resumed?.rehashedBytes == 0 && document.resumed?.bytes == record.bytes, "\(String(describing: document.resumed))")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("big.bin")) != sha, "the change in place was not read")
        let verify = try Mirror.run(["verify", fx.manifestPath, "--dest", fx.dest], timeout: 120)
        #expect(verify.exitCode == 1 && verify.stderr.contains("checksum mismatch"), "\(verify)")
    }

    /// A trusted resume whose final digest is wrong (the source's bytes past the checkpoint changed
    /// under the same validator) is fetched again from zero, never resumed from the same state
    /// again: the entry fails after a bounded number of fetches, and once the source is right
    /// again the next run fetches it from zero and ends correct.
    @Test func aWrongDigestAfterATrustedResumeIsFetchedAgainFromZeroAndDoesNotLoop() throws {
        let (fx, sha, record) = try killAfterACheckpoint()
        let served = fx.www + "/big.bin"
        let original = try Data(contentsOf: URL(fileURLWithPath: served))
        var before = stat()
        try #require(stat(served, &before) == 0)
        func serve(_ bytes: Data) throws {
            try bytes.write(to: URL(fileURLWithPath: served))
            var times = [before.st_atim, before.st_mtim]  // nginx's validator: mtime and size
            #expect(utimensat(AT_FDCWD, served, &times, 0) == 0)
        }
        var changed = original
        changed.replaceSubrange((changed.count - 4096)..<changed.count, with: [UInt8](repeating: 0x3C, count: 4096))
        try serve(changed)

        let count = try fx.requestsSoFar().count
        let failed = try fx.sync(["--segments", "1", "--json"])
        #expect(failed.exitCode == 1, "\(failed)")
        let document = try JSONOutput.makeDecoder().decode(SyncDocument.self, from: Data(failed.stdout.utf8))
        #expect(document.resumed?.rehashedBytes == 0, "\(String(describing: document.resumed))")
        let big = try fx.requests(atLeast: count + 2).dropFirst(count).filter { $0.uri == "/big.bin" }
        #expect(big.first?.rangeHeader == "bytes=\(record.bytes)-", "\(big)")
        #expect(big.count >= 2 && big.count <= 3 && big.dropFirst().allSatisfy { $0.rangeHeader == nil }, "\(big)")
        #expect(!fx.exists(fx.destPath("big.bin")))

        // The same validator with the right bytes: the refusal stands (a 304), nothing is fetched.
        try serve(original)
        let refused = try fx.sync(["--segments", "1"])
        #expect(refused.exitCode == 1 && refused.stderr.contains("was refused on"), "\(refused)")
        // The publisher's fix gives the file a new modification time, so a new validator.
        var later = [before.st_atim, timespec(tv_sec: before.st_mtim.tv_sec + 10, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, served, &later, 0) == 0)
        let again = try fx.sync(["--segments", "1", "--json"])
        #expect(again.exitCode == 0, "\(again)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("big.bin")) == sha)
        let last = try JSONOutput.makeDecoder().decode(SyncDocument.self, from: Data(again.stdout.utf8))
        #expect(last.resumed == nil && last.bytesTransferred == Self.size, "from zero: \(last)")
    }

    /// Another file under the partial file's name, with the same bytes, owner and mode: the saved
    /// state is not restored over it, the kept prefix is read back and hashed.
    @Test func aPartialFileReplacedByAnotherInodeIsHashedAgain() throws {
        let (fx, sha, record) = try killAfterACheckpoint()
        let path = fx.destPath(partialName)
        let copy = path + ".copy"
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        #expect(chmod(copy, 0o600) == 0)
        #expect(rename(copy, path) == 0)
        let document = try rerun(fx, sha: sha)
        let resumed = try #require(document.resumed, "\(document)")
        #expect(resumed.bytes == record.bytes && resumed.rehashedBytes == record.bytes, "\(resumed)")
    }

    /// A partial file chmod'ed so that others may write it (0666), or with a second name, is not
    /// this run's to resume at all: a new file takes its name and the download starts from zero.
    /// (A mode that lets nobody else write, as the Installer's seal leaves a file a crash kept
    /// from its rename, is set back to 0600 and resumed: PartialFileTests.aPartialSealedForInstallIsResumed.)
    @Test(arguments: ["chmod", "hardlink"])
    func aPartialFileChmodedOrLinkedIsNotResumed(change: String) throws {
        let (fx, sha, _) = try killAfterACheckpoint()
        let path = fx.destPath(partialName)
        if change == "chmod" {
            #expect(chmod(path, 0o666) == 0)
        } else {
            #expect(link(path, fx.dir.path("second-name")) == 0)
        }
        let before = try fx.requestsSoFar().count
        let document = try rerun(fx, sha: sha)
        #expect(document.resumed == nil, "\(String(describing: document.resumed))")
        let big = try fx.requests(atLeast: before + 1).dropFirst(before).filter { $0.uri == "/big.bin" }
        #expect(big.map(\.rangeHeader) == [nil], "\(big)")
    }
}
