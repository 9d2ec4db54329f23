import MirrorModel
import MirrorState
import Testing
import MirrorCore
import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// ``PathTurn``: what is in the way of a listed path, and whether mirror may replace it (docs/cli.md,
/// "A path that turns"). The decision is a value from facts; the planner's use of it runs on a real folder.
@Suite struct PathTurnDecisionTests {
    func file(_ path: String, inode: UInt64 = 1, mode: UInt32 = 0o100644) -> DeletionPlan.Item {
        DeletionPlan.Item(path: Array(path.utf8),
                          status: FileStatus(size: 10, mode: mode, inode: inode, device: 1,
                                             mtime: FileTime(seconds: 1, nanoseconds: 0), ctime: FileTime(seconds: 2, nanoseconds: 0)))
    }
    func bytes(_ path: String) -> [UInt8] { Array(path.utf8) }

    @Test func aFileTheJournalVouchesForIsReplaced() {
        let found = PathTurn.Found(path: bytes("pf"), files: [file("pf")])
        let clearance = PathTurn.decide(found) { _, _ in true }.clearance
        #expect(clearance?.files.map(\.path) == [bytes("pf")])
        #expect(clearance?.folders.isEmpty == true)
    }

    @Test func aFileTheJournalDoesNotVouchForBlocks() {
        let found = PathTurn.Found(path: bytes("pf"), files: [file("pf")])
        #expect(PathTurn.decide(found) { _, _ in false }.clearance == nil)
    }

    @Test func aSymlinkOrDeviceInTheWayBlocksWhateverTheJournalSays() {
        for mode: UInt32 in [0o120777, 0o020644, 0o010644] {
            let found = PathTurn.Found(path: bytes("pf"), files: [file("pf", mode: mode)])
            #expect(PathTurn.decide(found) { _, _ in true }.clearance == nil, "mode \(String(mode, radix: 8))")
        }
    }

    @Test func aFolderOfVouchedFilesGoesDeepestFolderFirst() {
        let found = PathTurn.Found(path: bytes("pf"), files: [file("pf/a.bin"), file("pf/sub/b.bin", inode: 2)],
                                   folders: [bytes("pf"), bytes("pf/sub")])
        var asked: [String] = []
        let clearance = PathTurn.decide(found) { path, _ in asked.append(path); return true }.clearance
        #expect(asked == ["pf/a.bin", "pf/sub/b.bin"])
        #expect(clearance?.files.map(\.path) == [bytes("pf/a.bin"), bytes("pf/sub/b.bin")])
        #expect(clearance?.folders == [bytes("pf/sub"), bytes("pf")])
    }

    @Test func oneFileOfTheUsersInTheFolderBlocksTheWholeFolder() {
        let found = PathTurn.Found(path: bytes("pf"), files: [file("pf/a.bin"), file("pf/notes.txt", inode: 2)],
                                   folders: [bytes("pf")])
        #expect(PathTurn.decide(found) { path, _ in path != "pf/notes.txt" }.clearance == nil)
    }

    @Test func aFolderMirrorLeftNothingInBlocks() {
        let empty = PathTurn.Found(path: bytes("pf"), files: [], folders: [bytes("pf")])
        #expect(PathTurn.decide(empty) { _, _ in true }.clearance == nil, "an empty folder is not known to be mirror's")
        let emptySub = PathTurn.Found(path: bytes("pf"), files: [file("pf/a.bin")], folders: [bytes("pf"), bytes("pf/empty")])
        #expect(PathTurn.decide(emptySub) { _, _ in true }.clearance == nil, "nor is an empty folder inside one")
    }

    @Test func aNameThatIsNotUTF8IsNeverMirrors() {
        let found = PathTurn.Found(path: bytes("pf"), files: [DeletionPlan.Item(path: bytes("pf/") + [0xFF], status: file("x").status)],
                                   folders: [bytes("pf")])
        #expect(PathTurn.decide(found) { _, _ in true }.clearance == nil)
    }

    @Test func onlyAnInstalledUnchangedFileIsVouchedFor() {
        let status = file("pf").status
        let identity = EntryIdentity(ManifestEntry.fixture("pf"))
        let installed = VerifiedRecord(identity: identity, status: status)
        #expect(PathTurn.vouches(installed, for: status))
        #expect(!PathTurn.vouches(nil, for: status), "no record: never installed")
        #expect(!PathTurn.vouches(VerifiedRecord(identity: identity, status: status, adopted: true), for: status),
                "found=1: mirror only found it there")
        var touched = status
        touched.ctime = FileTime(seconds: 3, nanoseconds: 0)
        #expect(!PathTurn.vouches(installed, for: touched), "changed since")
    }
}

/// The facts from a real folder (``Destination/inTheWay(of:)``) and the planner's use of the decision.
@Suite struct PathTurnPlanningTests {
    let fx: DestinationState
    init() throws { fx = try DestinationState() }

    /// Writes a file at `relative` (making its folders) and, with `installed`, journals it as
    /// mirror does after installing it.
    func write(_ relative: String, installed: Bool) throws {
        let parts = relative.split(separator: "/").dropLast()
        var walked = fx.dir.path
        for part in parts { walked += "/" + part; mkdir(walked, 0o755) }
        let path = fx.dir.path(relative)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        try #require(fd >= 0, "open \(path)")
        let file = FileDescriptor(fd: fd, displayPath: path)
        try TestData.bytes(count: 10, seed: 1).withUnsafeBytes { try file.write($0, at: 0) }
        file.close()
        guard installed else { return }
        let status = try #require(try fx.destination.status(of: relative))
        try JournalWriter(fx.journal).setUp(.verified(VerifiedRecord(identity: EntryIdentity(ManifestEntry.fixture(relative)), status: status)), durable: false)
    }

    @Test func aFileWhereAFolderMustBeIsFound() throws {
        try write("pf", installed: false)
        let found = try #require(try fx.destination.inTheWay(of: "pf/x/inner.bin"))
        #expect(found.path == Array("pf".utf8) && found.files.map(\.path) == [Array("pf".utf8)] && found.folders.isEmpty)
        #expect(try fx.destination.inTheWay(of: "pf") == nil, "a file at the path itself is not in the way")
        #expect(try fx.destination.inTheWay(of: "other/inner.bin") == nil)
    }

    @Test func aFolderAtThePathIsFoundWithAllItHolds() throws {
        try write("pf/a.bin", installed: false)
        try write("pf/sub/b.bin", installed: false)
        let found = try #require(try fx.destination.inTheWay(of: "pf"))
        #expect(Set(found.files.map(\.path)) == [Array("pf/a.bin".utf8), Array("pf/sub/b.bin".utf8)])
        #expect(Set(found.folders) == [Array("pf".utf8), Array("pf/sub".utf8)])
    }

    @Test func mirrorsOwnFileInTheWayIsPlannedAsAReplacement() throws {
        try write("pf", installed: true)
        #expect(try fx.planner.action(for: .fixture("pf/inner.bin")) == .download(replacing: true))
    }

    @Test func mirrorsOwnFolderInTheWayIsPlannedAsAReplacement() throws {
        try write("pf/a.bin", installed: true)
        try write("pf/sub/b.bin", installed: true)
        #expect(try fx.planner.action(for: .fixture("pf")) == .download(replacing: true))
    }

    @Test func aFileMirrorNeverInstalledStillBlocks() throws {
        try write("pf", installed: false)
        let reconciler = Reconciler(planner: fx.planner, journal: fx.journal)
        guard case .blocked(let why) = reconciler.action(for: .fixture("pf/inner.bin")) else {
            Issue.record("not blocked")
            return
        }
        #expect(why.contains("is a file, not a folder; move it away"), "\(why)")
    }

    @Test func aFolderWithAFileOfTheUsersStillBlocks() throws {
        try write("pf/a.bin", installed: true)
        try write("pf/notes.txt", installed: false)
        guard case .blocked(let why) = try fx.planner.action(for: .fixture("pf")) else {
            Issue.record("not blocked")
            return
        }
        #expect(why.contains("is a folder; move it away"), "\(why)")
    }

    @Test func clearingTakesTheFilesAndTheFoldersTheyLeaveEmpty() throws {
        try write("pf/a.bin", installed: true)
        try write("pf/sub/b.bin", installed: true)
        let found = try #require(try fx.destination.inTheWay(of: "pf"))
        let decision = PathTurn.decide(found) { PathTurn.vouches(fx.journal.records(for: $0)?.verified, for: $1) }
        let clearance = try #require(decision.clearance)
        let removed = try fx.destination.clear(clearance)
        #expect(Set(removed) == [Array("pf/a.bin".utf8), Array("pf/sub/b.bin".utf8)])
        #expect(try fx.destination.status(of: "pf") == nil)
    }

    @Test func clearingLeavesEverythingWhenOneFileChangedSinceTheDecision() throws {
        try write("pf/a.bin", installed: true)
        try write("pf/sub/b.bin", installed: true)
        let found = try #require(try fx.destination.inTheWay(of: "pf"))
        let decision = PathTurn.decide(found) { PathTurn.vouches(fx.journal.records(for: $0)?.verified, for: $1) }
        let clearance = try #require(decision.clearance)
        // Written since: another ctime.
        chmod(fx.dir.path("pf/sub/b.bin"), 0o600)
        #expect(throws: SystemError.self) { try fx.destination.clear(clearance) }
        #expect(try fx.destination.status(of: "pf/a.bin") != nil && fx.destination.status(of: "pf/sub/b.bin") != nil)
    }
}
