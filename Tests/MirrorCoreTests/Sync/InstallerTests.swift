@testable import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The installer on a real folder, without a server: verify, seal, commit (rename, journal), and
/// the check of a file already present.
@Suite struct InstallerTests {
    let fx: DestinationState
    let installer: Installer
    var dir: TemporaryDirectory { fx.dir }
    var destination: Destination { fx.destination }
    var partials: FileDescriptor { fx.partials }
    var journal: Journal { fx.journal }

    init() throws {
        fx = try DestinationState()
        installer = Installer(destination: fx.destination, partialFolder: fx.partials, writer: JournalWriter(fx.journal))
    }

    static let bytes = TestData.bytes(count: 100_000, seed: 3)

    func task(_ path: String, sha256: String) throws -> (EntryTask, PartialFile) {
        let entry = ManifestEntry(path: path, url: .relative(path), size: Int64(Self.bytes.count),
                                  digests: [.sha256: try #require(Digest(hex: sha256, byteCount: 32))])
        let task = EntryTask(entry: entry, sources: ["http://127.0.0.1/" + path], replacing: false)
        let partial = try PartialFile(identity: EntryIdentity(entry), folder: partials, folderDisplay: "partial", journal: JournalWriter(journal))
        try Self.bytes.withUnsafeBytes { try partial.append($0) }
        task.partial = partial
        return (task, partial)
    }

    @Test func aVerifiedFileIsInstalledAndJournaledOnlyAtCommit() throws {
        let (task, partial) = try task("a/b.bin", sha256: TestData.sha256(of: Self.bytes))
        guard case .queued = installer.verify(partial, for: task) else {
            Issue.record("the digests match")
            return
        }
        #expect(journal.records(for: "a/b.bin")?.verified == nil, "nothing is vouched for before the rename")
        let done = installer.commit()
        #expect(done.installed.count == 1 && done.failed.isEmpty && done.fatal == nil)
        #expect(try TestData.sha256(ofFileAt: dir.path("a/b.bin")) == TestData.sha256(of: Self.bytes))
        let status = try #require(try destination.status(of: "a/b.bin"))
        #expect(status.permissions == 0o644)
        #expect(journal.isVerified(task.entry, status: status))
    }

    @Test func otherBytesAreAMismatchWithTheDigestTheyHave() throws {
        let wrong = String(repeating: "0", count: 64)
        let (task, partial) = try task("c.bin", sha256: wrong)
        guard case .mismatch(let detail, let got) = installer.verify(partial, for: task) else {
            Issue.record("the digests differ")
            return
        }
        #expect(got == TestData.sha256(of: Self.bytes))
        #expect(detail.contains("expected sha256 \(wrong)"))
        #expect(installer.commit().installed.isEmpty)
    }

    @Test func aPresentFileIsCheckedAndRecordedOrFetchedAgain() throws {
        let good = ManifestEntry(path: "p.bin", url: .relative("p.bin"), size: Int64(Self.bytes.count),
                                 digests: [.sha256: try #require(Digest(hex: TestData.sha256(of: Self.bytes), byteCount: 32))])
        try Self.bytes.withUnsafeBytes { raw in
            let fd = open(dir.path("p.bin"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            try #require(fd >= 0)
            try FileDescriptor(fd: fd, displayPath: "p.bin").write(raw, at: 0)
        }
        guard case .verified(let waiting?) = installer.check(good) else {
            Issue.record("the present file is the manifest's, and its record waits for its batch's sync")
            return
        }
        // Not journaled before the sync that makes its bytes durable (``FoundRecords``).
        #expect(journal.records(for: "p.bin")?.verified == nil)
        var found = FoundRecords()
        found.add(waiting, now: 0)
        try found.flush(to: installer.writer, syncing: installer.partialFolder)
        #expect(journal.records(for: "p.bin")?.verified != nil)
        #expect(found.waiting.isEmpty)
        var other = good
        other.digests = [.sha256: Digest(bytes: [UInt8](repeating: 1, count: 32))]
        guard case .differs = installer.check(other) else {
            Issue.record("other bytes must be fetched again")
            return
        }
        guard case .unreadable = installer.check(ManifestEntry(path: "missing.bin", url: .relative("missing.bin"), size: 1,
                                                               digests: good.digests)) else {
            Issue.record("a file that cannot be opened fails its entry")
            return
        }
    }

    /// ``FoundFilePolicy`` before a byte is read: another user's file (a policy for another uid
    /// plays the running user here) is not hashed nor journaled but to be copied; this user's
    /// setuid file is hashed, `fchmod`ed in place (same inode) and journaled with its new status.
    @Test func aPresentFileIsKeptFixedOrCopiedByOwnerAndMode() throws {
        let entry = ManifestEntry(path: "f.bin", url: .relative("f.bin"), size: Int64(Self.bytes.count),
                                  digests: [.sha256: try #require(Digest(hex: TestData.sha256(of: Self.bytes), byteCount: 32))])
        try Self.bytes.withUnsafeBytes { raw in
            let fd = open(dir.path("f.bin"), O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            try #require(fd >= 0)
            #expect(fchmod(fd, 0o4755) == 0)
            try FileDescriptor(fd: fd, displayPath: "f.bin").write(raw, at: 0)
        }
        let before = try #require(try destination.status(of: "f.bin"))
        let stranger = FoundFilePolicy(user: before.owner &+ 1)
        guard case .copy(.otherOwner(before.owner), mirrors: _) = installer.check(entry, policy: stranger) else {
            Issue.record("a file of another user is copied, not adopted")
            return
        }
        #expect(journal.records(for: "f.bin")?.verified == nil)
        #expect(try destination.status(of: "f.bin") == before, "nothing changed")

        guard case .verified(let waiting?) = installer.check(entry, policy: FoundFilePolicy(user: before.owner)) else {
            Issue.record("this user's file with only another mode is fixed and vouched for")
            return
        }
        var found = FoundRecords()
        found.add(waiting, now: 0)
        try found.flush(to: installer.writer, syncing: installer.partialFolder)
        let after = try #require(try destination.status(of: "f.bin"))
        #expect(after.permissions == 0o644 && after.inode == before.inode)
        #expect(journal.isVerified(entry, status: after))
    }
}
