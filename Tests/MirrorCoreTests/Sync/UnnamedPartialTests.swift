import Foundation
@testable import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A small new download has no name until it is verified (``PartialNaming``): the installer's
/// tests on a real folder, without a server, for a file with no name.
extension InstallerTests {
    static let smallBytes = TestData.bytes(count: 50_000, seed: 11)
    static let naming = PartialNaming(canLinkOpenFiles: true)

    func unnamedDownload(_ path: String, bytes: [UInt8] = smallBytes) throws -> (EntryTask, PartialFile) {
        let entry = ManifestEntry(path: path, url: .relative(path), size: Int64(bytes.count),
                                  digests: [.sha256: try #require(Digest(hex: TestData.sha256(of: bytes), byteCount: 32))])
        let task = EntryTask(entry: entry, sources: ["http://127.0.0.1/" + path], replacing: false)
        let partial = try PartialFile(identity: EntryIdentity(entry), folder: partials, folderDisplay: "partial",
                                      journal: JournalWriter(journal), naming: Self.naming)
        partial.sourceURL = "http://127.0.0.1/" + path
        try bytes.withUnsafeBytes { try partial.append($0) }
        task.partial = partial
        return (task, partial)
    }

    func write(_ bytes: [UInt8], to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else { throw HarnessError("cannot write \(path)") }
    }

    func partialFolderNames() throws -> [[UInt8]] { try partials.entryNames() }

    func installUnnamed(_ task: EntryTask, _ partial: PartialFile) throws -> Installer.Committed {
        guard case .queued = installer.verify(partial, for: task) else {
            throw HarnessError("the digests of \(task.entry.path) match")
        }
        return installer.commit()
    }

    @Test func aSmallNewDownloadHasNoNameUntilItIsLinkedIntoPlace() throws {
        let (task, partial) = try unnamedDownload("a/b.bin")
        #expect(partial.isUnnamed)
        #expect(try partialFolderNames().isEmpty, "nothing in .mirror/partial while it downloads")
        // A checkpoint (a failed attempt, a stop) journals nothing: no later run can resume it.
        partial.checkpoint()
        partial.settle()
        #expect(journal.records(for: "a/b.bin")?.partial == nil)

        let done = try installUnnamed(task, partial)
        #expect(done.installed.count == 1 && done.failed.isEmpty && done.fatal == nil)
        #expect(try TestData.sha256(ofFileAt: dir.path("a/b.bin")) == TestData.sha256(of: Self.smallBytes))
        let status = try #require(try destination.status(of: "a/b.bin"))
        #expect(status.permissions == 0o644 && status.links == 1)
        #expect(journal.isVerified(task.entry, status: status))
        #expect(try partialFolderNames().isEmpty)
    }

    /// ``Destination/status(of:)`` remembers a missing folder for the next entries in it; the
    /// folder the install makes must end that, or the file just installed would look absent.
    @Test func aFolderTheInstallMakesIsSeenByTheNextLook() throws {
        #expect(try destination.status(of: "new/x.bin") == nil)
        #expect(try destination.status(of: "new/y.bin") == nil)
        let (task, partial) = try unnamedDownload("new/x.bin")
        let done = try installUnnamed(task, partial)
        #expect(done.installed.count == 1)
        let status = try #require(try destination.status(of: "new/x.bin"))
        #expect(journal.isVerified(task.entry, status: status))
    }

    @Test func aFileAlreadyAtThePathIsReplacedByRename() throws {
        try write([UInt8](repeating: 7, count: 10), to: dir.path("r.bin"))
        // An earlier run's partial file under the same name is no obstacle.
        try write([1, 2, 3], to: dir.path(".mirror/partial/" + PartialFile.name(for: "r.bin")))
        let (task, partial) = try unnamedDownload("r.bin")
        let done = try installUnnamed(task, partial)
        #expect(done.installed.count == 1 && done.failed.isEmpty)
        #expect(try TestData.sha256(ofFileAt: dir.path("r.bin")) == TestData.sha256(of: Self.smallBytes))
        #expect(try partialFolderNames().isEmpty, "the name it took for the rename went with the rename")
    }

    @Test func aFolderInTheWayFailsTheEntryAndKeepsTheFolder() throws {
        #expect(mkdir(dir.path("taken"), 0o755) == 0)
        let (task, partial) = try unnamedDownload("taken")
        let done = try installUnnamed(task, partial)
        #expect(done.installed.isEmpty)
        let error = try #require(done.failed.first?.error as? SystemError)
        #expect(error.code == EISDIR, "\(error)")
        var st = stat()
        #expect(lstat(dir.path("taken"), &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR)
    }

    /// The run's try at a file with no name: it works here (ext4 or tmpfs, /proc mounted), leaves
    /// nothing behind, and removes a leftover of a try that was killed.
    @Test func theRunsTryAtAFileWithNoNameLeavesNothing() throws {
        #expect(PartialFile.canLinkUnnamedFiles(in: partials))
        #expect(try partialFolderNames().isEmpty)
        try write([1], to: dir.path(".mirror/partial/" + PartialFile.linkProbeName))
        #expect(PartialFile.canLinkUnnamedFiles(in: partials))
        #expect(try partialFolderNames().isEmpty)
    }

    @Test func largerAndResumedDownloadsKeepTheirName() throws {
        let big = [UInt8](repeating: 5, count: Int(PartialNaming.limit) + 1)
        let (_, partial) = try unnamedDownload("big.bin", bytes: big)
        #expect(!partial.isUnnamed)
        #expect(try partialFolderNames().count == 1)
    }
}
