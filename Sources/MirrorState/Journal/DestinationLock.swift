import MirrorFS
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// The one lock of a destination, and the one answer to where its state is (docs/cli.md, "One
/// run at a time"): `flock(2)` on `lock` in DEST's state folder, taken before anything else of
/// DEST is opened.
///
/// A DEST keeps its state in one of two places: `DEST/.mirror` (a plain DEST) or
/// `DEST.generations/.mirror` (an atomic one, and one whose conversion has begun; a conversion
/// moves the folder, lock file and all, from the first place to the second while holding it).
/// Both are found from DEST's ``DestinationIdentity``, never from how the path was spelled. The
/// lock is held on the lock file of every state folder that exists, and after the `flock`s the
/// places are looked up again: if a state folder appeared, or a lock file was replaced or
/// unlinked meanwhile (another run created or moved it, `--delete-unlisted` of an outer DEST
/// removed it), the locks are let go and taken again. So two runs can never both believe they
/// own one DEST, whatever it is called and whatever stage its conversion is at.
///
/// `flock` locks belong to the open file description, so the kernel releases them when the
/// process dies, however it dies (SIGKILL, power cut): a stale lock never blocks the next run.
/// Each lock file holds the holder's pid, only so that a refusal (and `status`) can name it.
public final class DestinationLock {
    public enum Failure: Error, CustomStringConvertible {
        case held(destination: String, pid: String?)
        /// SIGINT or SIGTERM came while `--wait` waited: nothing was done.
        case interrupted(destination: String)

        public var description: String {
            switch self {
            case .held(let destination, let pid):
                let by = pid.map { " (pid \($0))" } ?? ""
                return "\(destination) is being synced by another mirror run\(by); try again later, or pass --wait"
            case .interrupted(let destination):
                return "stopped while waiting for another mirror run on \(destination) to finish; nothing was done"
            }
        }
    }

    /// Where state is made when DEST has none yet.
    public enum Creating {
        /// `DEST/.mirror`, DEST made first when missing (a plain sync).
        case plain
        /// `DEST.generations/.mirror` (an `--atomic` sync of a DEST with no state).
        case store
        /// Nothing (rollback): a DEST without state has no lock to take.
        case nothing
    }

    enum Place: Equatable { case plain, store }

    private struct Held {
        var place: Place
        /// The folder `.mirror` is in (DEST, or its store), and `.mirror` itself.
        let parent: FileDescriptor
        let folder: FileDescriptor
        let file: FileDescriptor
    }

    public let identity: DestinationIdentity
    private var held: [Held]

    /// Whether DEST's state is in its generation store: DEST is atomic, or its conversion began.
    public var stateIsInStore: Bool { held.contains { $0.place == .store } }
    /// Whether DEST has a `.mirror` of its own too (a plain DEST, or one about to be converted).
    var hasPlainState: Bool { held.contains { $0.place == .plain } }

    /// Takes DEST's lock, or throws ``Failure/held(destination:pid:)`` at once (unless `wait`, when
    /// it waits until the holder ends, or ``Failure/interrupted(destination:)`` once `shouldStop`
    /// says so; it is asked every 50 ms). Returns nil only with ``Creating/nothing`` when DEST has
    /// no state at all.
    public static func take(_ identity: DestinationIdentity, creating: Creating, wait: Bool,
                            shouldStop: () -> Bool = { false }) throws -> DestinationLock? {
        // Each turn that finds the places changed under its locks starts again; a turn only
        // changes when another process created, moved or removed a state folder meanwhile.
        for _ in 0..<100 {
            var places = try statePlaces(identity)
            if places.isEmpty {
                guard try create(creating, identity) else { return nil }
                places = try statePlaces(identity)
            }
            var held: [Held] = []
            for (place, parent, folder) in places {
                let display = folder.displayPath + "/lock"
                let fd = DiskChange.openat(folder.fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
                if fd < 0 { throw SystemError("create lock file in", folder.displayPath) }
                let file = FileDescriptor(fd: fd, displayPath: display)
                // It is truncated and written below: it must not be a hard link to some other file.
                try SafePath.requireSoleRegularFile(fd, display)
                try lock(file, identity: identity, wait: wait, shouldStop: shouldStop)
                held.append(Held(place: place, parent: parent, folder: folder, file: file))
            }
            let lock = DestinationLock(identity: identity, held: held)
            if try lock.stillOwnsEveryPlace() {
                for entry in held {
                    try entry.file.truncate(to: 0)
                    let pid = Array("\(getpid())\n".utf8)
                    try pid.withUnsafeBytes { try entry.file.write($0, at: 0) }
                }
                return lock
            }
            lock.release()
        }
        throw SystemError("lock", identity.displayPath + " (its state folder keeps changing under another process)", code: EAGAIN)
    }

    private init(identity: DestinationIdentity, held: [Held]) {
        self.identity = identity
        self.held = held
    }

    /// The state folder a run uses: the store's when there is one (the plain DEST's `.mirror`
    /// beside it is then a leftover of a conversion, locked but unused).
    public var stateFolder: FileDescriptor? {
        (held.first { $0.place == .store } ?? held.first)?.folder
    }

    /// Releases the lock (closing the descriptors releases the `flock`s). Each lock file is
    /// emptied first, while still held: a lock file that names a pid with nobody holding its lock
    /// is then a run that never released it (killed, or the machine stopped), which `status`
    /// reports (``leftBehind(in:)``). Releasing twice does nothing more.
    public func release() {
        for entry in held {
            try? entry.file.truncate(to: 0)
            entry.file.close()
        }
        held = []
    }

    /// A run that took DEST's lock and never released it: the pid its lock file in `stateFolder`
    /// still names and when it was written (the lock file's modification time, Unix seconds).
    /// Only meaningful when nobody holds the lock now; read without taking it (`status` never
    /// does). nil when the lock file is missing, empty or holds no pid.
    public static func leftBehind(in stateFolder: FileDescriptor) -> (pid: Int, since: Int64)? {
        let fd = openat(stateFolder.fd, "lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        let file = FileDescriptor(fd: fd, displayPath: "lock")
        defer { file.close() }
        guard let status = try? file.stat(), status.isRegularFile, status.size > 0, status.size < 64,
              let bytes = try? file.readAll(), let pid = Int(String(decoding: bytes, as: UTF8.self).trimmingSpaces), pid > 0 else {
            return nil
        }
        return (pid, status.mtime.seconds)
    }

    /// Moves a plain DEST's `.mirror` into its store (a conversion to `--atomic`), lock file and
    /// all, so the lock stays held. The move is by name (`renameat(2)`), so a user who can write
    /// DEST could swap `.mirror` just before it: the moved folder is then checked to be the very
    /// folder this lock holds (same device and inode), and if it is not, it is moved back and the
    /// run stops. Both folders are synced, so the move is durable before the run goes on.
    package func moveState(into store: FileDescriptor) throws {
        guard let index = held.firstIndex(where: { $0.place == .plain }), !stateIsInStore else { return }
        let plain = held[index]
        let name = Destination.stateFolderName
        if DiskChange.renameat(plain.parent.fd, name, store.fd, name) != 0 {
            throw SystemError("move", plain.folder.displayPath + " into " + store.displayPath)
        }
        var st = stat()
        let moved = fstatat(store.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? FileStatus(st) : nil
        guard let moved, moved.sameFile(as: try plain.folder.stat()) else {
            _ = DiskChange.renameat(store.fd, name, plain.parent.fd, name)
            throw SystemError("move", plain.folder.displayPath + " into " + store.displayPath
                + " (it was replaced while mirror ran; check who writes in the destination)", code: EBUSY)
        }
        try store.sync()
        try plain.parent.sync()
        held[index].place = .store
    }

    /// Whether the places DEST keeps state in now are exactly the ones locked: each lock file
    /// still the one at its `.mirror/lock` (same device and inode), and no state folder new.
    private func stillOwnsEveryPlace() throws -> Bool {
        let now = try DestinationLock.statePlaces(identity)
        guard now.count == held.count else { return false }
        for (place, _, folder) in now {
            var st = stat()
            guard fstatat(folder.fd, "lock", &st, AT_SYMLINK_NOFOLLOW) == 0,
                  let mine = held.first(where: { $0.place == place }), try FileStatus(st).sameFile(as: mine.file.stat()) else { return false }
        }
        return true
    }

    /// `flock(LOCK_EX)` on `file`. Without `wait`, at once or ``Failure/held(destination:pid:)``;
    /// with it, `LOCK_NB` tried every 50 ms, so that a signal ends the wait at once (a blocking
    /// `flock` would be restarted after the handler: `signal(2)` sets `SA_RESTART`).
    private static func lock(_ file: FileDescriptor, identity: DestinationIdentity, wait: Bool, shouldStop: () -> Bool) throws {
        while retryingOnEINTR({ flock(file.fd, LOCK_EX | LOCK_NB) }) != 0 {
            guard errno == EWOULDBLOCK else { throw SystemError("lock", file.displayPath) }
            guard wait else {
                let holder = (try? file.readAll()).map { String(decoding: $0, as: UTF8.self).trimmingSpaces }
                throw Failure.held(destination: identity.displayPath, pid: holder?.isEmpty == false ? holder : nil)
            }
            if shouldStop() { throw Failure.interrupted(destination: identity.displayPath) }
            var step = timespec(tv_sec: 0, tv_nsec: 50_000_000)
            nanosleep(&step, nil)
        }
    }

    /// The state folders DEST has now, plain first: `DEST/.mirror` when DEST is a folder (not
    /// the symlink of an atomic DEST) and `DEST.generations/.mirror`. Each is opened without
    /// following a link; a `.mirror` that is a symlink or a file stops the run (SECURITY.md), and
    /// so does one that is not this user's alone (``StateOwnership``), before a lock file is
    /// made in it.
    static func statePlaces(_ identity: DestinationIdentity) throws -> [(Place, FileDescriptor, FileDescriptor)] {
        var places: [(Place, FileDescriptor, FileDescriptor)] = []
        for (place, path) in [(Place.plain, identity.path), (.store, identity.storePath)] {
            let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { continue }
            let parent = FileDescriptor(fd: fd, displayPath: place == .plain ? identity.displayPath : identity.storePath)
            let shown = parent.displayPath + "/" + Destination.stateFolderName
            let state = openat(fd, Destination.stateFolderName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if state < 0 {
                if errno == ENOENT { continue }
                throw SystemError("use \(shown) (a symlink or not a folder) as", "the state folder", code: errno)
            }
            let folder = FileDescriptor(fd: state, displayPath: shown)
            try StateOwnership.require(folder, shown)
            places.append((place, parent, folder))
        }
        return places
    }

    /// Makes the state folder where `creating` says (DEST, or its store, made first when missing).
    private static func create(_ creating: Creating, _ identity: DestinationIdentity) throws -> Bool {
        switch creating {
        case .nothing:
            return false
        case .plain:
            let dest = try Destination.create(identity.path)
            _ = try dest.stateFolder(create: true)
        case .store:
            guard let store = try GenerationStore.open(identity, create: true) else { return false }
            if DiskChange.mkdirat(store.store.fd, Destination.stateFolderName, 0o755) == 0 {
                try store.store.sync()
            } else if errno != EEXIST {
                throw SystemError("create folder", identity.storePath + "/" + Destination.stateFolderName)
            }
        }
        return true
    }
}
