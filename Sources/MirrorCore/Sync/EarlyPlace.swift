import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState

/// The part of a run's place (``RunPlace``) that needs no manifest, opened while the manifest is
/// read: DEST's lock, taken at once, and DEST's journal, read on a thread of its own
/// (``Background``) (docs/performance.md, "A no-op reads the journal while the manifest is read").
///
/// Why: at 10^6 entries reading the manifest keeps one core busy for about 1.3 s and replaying
/// the journal another for about 0.7 s; one after the other, the two were most of a no-op. On two
/// cores the run now waits for the longer of the two, and the second core then plans the entries
/// read so far (``PlanLookAhead``).
///
/// Only what a run would open anyway, and only when nothing must be made for it: a local manifest
/// without `--trust` (a signature is checked before DEST is touched), `--dest` naming DEST, state
/// there already (``DestinationLock/Creating/nothing``), and no conversion to `--atomic` due (that
/// moves the state folder: the run does it once the manifest is valid). The lock is tried, never
/// waited for: a held lock (with or without `--wait`) is left to the run, which reports or waits
/// for it after the manifest, as before. What goes wrong here is not an error yet: the run opens
/// its place the usual way, and says what it finds.
///
/// The manifest is still checked first: an invalid one is reported as it always was, and the
/// lock is given back only after the journal read ended (``abandon()``), since that read may cut a
/// torn tail (docs/journal.md, rule 2), which only the lock's holder may do.
final class EarlyPlace {
    let identity: DestinationIdentity
    let lock: DestinationLock
    /// The state folder whose journal is read (the lock's, ``DestinationLock/stateFolder``).
    private let stateFolder: FileDescriptor
    private let read: Background<Result<Journal, Error>>
    /// For ``PlanLookAhead``: the set DEST shows (a plain DEST itself, an atomic DEST's current
    /// generation), which a no-op finds up to date entry by entry (``AtomicBuild/currentIsComplete(known:)``).
    private let shownSet: Destination?
    private var handedOver = false

    private init(identity: DestinationIdentity, lock: DestinationLock, stateFolder: FileDescriptor, shownSet: Destination?) {
        self.identity = identity
        self.lock = lock
        self.stateFolder = stateFolder
        self.shownSet = shownSet
        let displayPath = stateFolder.displayPath + "/" + Journal.fileName
        read = Background { Result { try Journal(folder: stateFolder, displayPath: displayPath, readOnly: false) } }
    }

    /// Takes DEST's lock and starts reading its journal, or nil when the run must open its place
    /// itself (see the type's conditions; `destPath` is `--dest`).
    static func open(_ destPath: String, atomic: Bool) -> EarlyPlace? {
        guard let identity = try? DestinationIdentity.resolve(destPath),
              let lock = try? DestinationLock.take(identity, creating: .nothing, wait: false) else { return nil }
        guard let folder = lock.stateFolder, !(atomic && !lock.stateIsInStore) else {
            lock.release()
            return nil
        }
        let shown = (try? Destination.openExisting(identity)) ?? nil
        return EarlyPlace(identity: identity, lock: lock, stateFolder: folder, shownSet: shown)
    }

    /// The look-ahead's planner, once the journal is read: nil when DEST shows no set yet or the
    /// journal could not be read. Called on the look-ahead's thread.
    var planner: @Sendable () -> Planner? {
        let (read, folder) = (read, shownSet)
        return {
            guard let folder, case .success(let journal) = read.value() else { return nil }
            return Planner(destination: folder.sibling(), journal: journal, partialFolder: nil)
        }
    }

    /// The run takes the lock and the journal over (``RunPlace``): from here on it releases them.
    func handOver() -> EarlyPlace {
        handedOver = true
        return self
    }

    /// The journal read for `state`, the state folder the run opened: waits for the read. nil when
    /// `state` is another folder than the one read (the run then reads its own); a read that
    /// failed throws what it failed with, which the run's own read would have thrown.
    func journal(for state: FileDescriptor) throws -> Journal? {
        // Waited for either way: a read of another folder may still cut that journal's torn tail.
        let result = read.value()
        guard let ours = try? stateFolder.stat(), let theirs = try? state.stat(), ours.sameFile(as: theirs) else { return nil }
        return try result.get()
    }

    /// Waits until the journal read has ended: before the lock is given back, whoever gives it.
    func waitForRead() {
        _ = read.value()
    }

    /// The run never came to open its place (an invalid manifest, a stop): the journal read ends,
    /// then the lock is given back. Does nothing once the run took it over.
    func abandon() {
        guard !handedOver else { return }
        handedOver = true
        waitForRead()
        lock.release()
    }
}
