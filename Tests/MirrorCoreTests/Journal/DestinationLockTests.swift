import Foundation
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// What a DEST is (``DestinationIdentity``) and its one lock (``DestinationLock``), without a
/// server: spellings, generations, a waiter told to stop, and a state folder swapped under a
/// conversion.
@Suite struct DestinationLockTests {
    let dir: TemporaryDirectory
    var dest: String { dir.path("media") }
    var store: String { dir.path("media.generations") }

    init() throws {
        dir = try TemporaryDirectory(prefix: "mirror-lock")
        try FileManager.default.createDirectory(atPath: dest + "/.mirror", withIntermediateDirectories: true)
    }

    /// Makes DEST atomic by hand: the state in the store, DEST a symlink to g1 (g2 kept beside).
    func makeAtomic() throws {
        try FileManager.default.createDirectory(atPath: store + "/g1", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: store + "/g2", withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: dest + "/.mirror", toPath: store + "/.mirror")
        try FileManager.default.removeItem(atPath: dest)
        try FileManager.default.createSymbolicLink(atPath: dest, withDestinationPath: "media.generations/g1")
    }

    @Test func everySpellingOfAPlainDestIsOneIdentity() throws {
        try FileManager.default.createSymbolicLink(atPath: dir.path("alias"), withDestinationPath: dest)
        let canonical = try DestinationIdentity.resolve(dest)
        for spelling in [dest + "/", dest + "/.", dest + "/./", dir.path("alias"), dir.path("alias/."), dir.path(".") + "/media"] {
            let identity = try DestinationIdentity.resolve(spelling)
            #expect(identity.path == canonical.path, "\(spelling)")
            #expect(identity.displayPath == spelling)
        }
    }

    @Test func anAtomicDestIsFoundFromItsCurrentGenerationAndOthersAreRefused() throws {
        try makeAtomic()
        let canonical = try DestinationIdentity.resolve(dest)
        #expect(canonical.name == "media")
        for spelling in [dest + "/.", store + "/g1", store + "/g1/"] {
            #expect(try DestinationIdentity.resolve(spelling).path == canonical.path, "\(spelling)")
        }
        for refused in [store + "/g2", store] {
            #expect(throws: SystemError.self, "\(refused)") { try DestinationIdentity.resolve(refused) }
        }
        try FileManager.default.createDirectory(atPath: store + "/building", withIntermediateDirectories: true)
        #expect(throws: SystemError.self) { try DestinationIdentity.resolve(store + "/building") }
        // Paths that do not exist yet, and paths inside a set, are refused as well.
        for refused in [store + "/g7", store + "/g2/sub", store + "/g1/sub", store + "/building/x/y"] {
            #expect(throws: SystemError.self, "\(refused)") { try DestinationIdentity.resolve(refused) }
        }
    }

    @Test func aNewDestIsNamedByItsParent() throws {
        let identity = try DestinationIdentity.resolve(dir.path("new/."))
        #expect(identity.name == "new")
        #expect(identity.folder == DestinationIdentity.canonical(dir.path))
    }

    /// A symlink to a DEST not made yet (an atomic DEST before its first generation) names that
    /// DEST, never a DEST of its own beside it (whose store would be `alias.generations`).
    @Test func aSymlinkToADestNotMadeYetNamesThatDest() throws {
        try FileManager.default.createSymbolicLink(atPath: dir.path("alias"), withDestinationPath: "later")
        try FileManager.default.createSymbolicLink(atPath: dir.path("alias2"), withDestinationPath: "alias")
        let later = try DestinationIdentity.resolve(dir.path("later"))
        for spelling in [dir.path("alias"), dir.path("alias2"), dir.path("alias") + "/."] {
            let identity = try DestinationIdentity.resolve(spelling)
            #expect(identity.path == later.path, "\(spelling)")
            #expect(identity.displayPath == spelling)
        }
        try FileManager.default.createSymbolicLink(atPath: dir.path("loop"), withDestinationPath: "loop")
        #expect(throws: SystemError.self) { try DestinationIdentity.resolve(dir.path("loop")) }
    }

    @Test func twoSpellingsTakeOneLock() throws {
        let first = try #require(try DestinationLock.take(DestinationIdentity.resolve(dest), creating: .plain, wait: false))
        defer { first.release() }
        #expect(throws: DestinationLock.Failure.self) {
            _ = try DestinationLock.take(DestinationIdentity.resolve(dest + "/."), creating: .plain, wait: false)
        }
    }

    /// A DEST with both state folders (a conversion's leftover): a run holds both, so a run that
    /// looks only at one of them is refused too.
    @Test func everyStateFolderIsLocked() throws {
        try FileManager.default.createDirectory(atPath: store + "/.mirror", withIntermediateDirectories: true)
        let lock = try #require(try DestinationLock.take(DestinationIdentity.resolve(dest), creating: .plain, wait: false))
        defer { lock.release() }
        #expect(lock.stateIsInStore && lock.hasPlainState)
        for path in [dest + "/.mirror/lock", store + "/.mirror/lock"] {
            let fd = open(path, O_RDWR | O_CLOEXEC)
            defer { close(fd) }
            #expect(flock(fd, LOCK_EX | LOCK_NB) != 0, "\(path) is not locked")
        }
    }

    @Test func aWaiterToldToStopEndsWithoutTheLock() throws {
        let identity = try DestinationIdentity.resolve(dest)
        let holder = try #require(try DestinationLock.take(identity, creating: .plain, wait: false))
        defer { holder.release() }
        var asked = 0
        do {
            _ = try DestinationLock.take(identity, creating: .plain, wait: true, shouldStop: { asked += 1; return asked > 2 })
            Issue.record("the waiter took a held lock")
        } catch DestinationLock.Failure.interrupted {
            #expect(asked == 3)
        }
    }

    @Test func rollbackFindsNoLockWhereThereIsNoState() throws {
        try FileManager.default.removeItem(atPath: dest + "/.mirror")
        #expect(try DestinationLock.take(DestinationIdentity.resolve(dest), creating: .nothing, wait: false) == nil)
        #expect(!FileManager.default.fileExists(atPath: dest + "/.mirror"))
    }

    /// `.mirror` swapped for another folder between the lock and the conversion's move: the move
    /// is undone and refused, and the swapped-in folder is back where it was.
    @Test func aStateFolderSwappedBeforeTheMoveIsNotAdopted() throws {
        let identity = try DestinationIdentity.resolve(dest)
        let lock = try #require(try DestinationLock.take(identity, creating: .plain, wait: false))
        defer { lock.release() }
        try FileManager.default.moveItem(atPath: dest + "/.mirror", toPath: dest + "/.mine")
        try FileManager.default.createDirectory(atPath: dest + "/.mirror", withIntermediateDirectories: false)
        try Data("planted".utf8).write(to: URL(fileURLWithPath: dest + "/.mirror/journal"))
        let storeFd = try #require(try GenerationStore.open(identity, create: true)).store

        #expect(throws: SystemError.self) { try lock.moveState(into: storeFd) }
        #expect(FileManager.default.fileExists(atPath: dest + "/.mirror/journal"))
        #expect(!FileManager.default.fileExists(atPath: store + "/.mirror"))
        #expect(!lock.stateIsInStore)
    }
}
