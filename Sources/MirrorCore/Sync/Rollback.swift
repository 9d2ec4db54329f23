import MirrorFS
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// `mirror rollback --dest DEST`: points an atomic DEST back at the complete generation before the
/// current one, in one `renameat(2)` (``GenerationStore/switchTo(_:)``; docs/cli.md, "Atomic
/// destinations"). Under DEST's lock, so it never races a sync that is about to switch.
public enum Rollback {
    public enum Failure: Error, CustomStringConvertible, ExitCoded {
        /// DEST is not a symlink to a generation (never synced with `--atomic`).
        case notAtomic(String)
        case noEarlierGeneration(String, current: Int)
        case destination(SystemError)
        case locked(DestinationLock.Failure)

        public var description: String {
            switch self {
            case .notAtomic(let dest):
                return "\(dest) is not an atomic destination (made by `mirror sync --atomic`): there is no earlier set to go back to"
            case .noEarlierGeneration(let dest, let current):
                return "\(dest) holds generation \(current), and no earlier complete generation is kept (see --keep)"
            case .destination(let error): return error.description
            case .locked(let failure): return failure.description
            }
        }

        public var exitStatus: Int32 {
            switch self {
            case .notAtomic, .noEarlierGeneration: return ExitStatus.entriesFailed
            case .destination: return ExitStatus.cannotWrite
            case .locked: return ExitStatus.tryLater
            }
        }
    }

    /// What a rollback did: the generations, and the hold it recorded (nil when the generation
    /// rolled back from has no recorded manifest: the next sync then builds again).
    public struct Switched: Equatable, Sendable {
        public var from: Int
        public var to: Int
        public var hold: RollbackHold?
    }

    /// Switches DEST to the newest complete generation older than the current one, after
    /// recording a hold (``HoldPolicy``): a later sync of the manifest the current generation was
    /// built from changes nothing. The hold is durable before the switch, so a crash between the
    /// two leaves a hold that the next sync drops (DEST does not show its generation), never a
    /// rollback without one. The lock is taken first and the current generation read after it:
    /// a rollback that waited behind a publishing sync goes back from what that sync published.
    public static func run(destination destPath: String, wait: Bool) throws(Failure) -> Switched {
        try locked(destPath, wait: wait) { store, current, state throws in
            guard let previous = try store.generations().last(where: { $0 < current }) else {
                throw Failure.noEarlierGeneration(destPath, current: current)
            }
            let hold = HoldPolicy.afterRollback(existing: try? HoldFile.readHold(in: state), from: current, to: previous,
                                                fromManifest: try HoldFile.builtFrom(in: state)[current])
            if let hold { try HoldFile.writeHold(hold, in: state) } else { try HoldFile.removeHold(in: state) }
            do {
                try store.switchTo(previous)
            } catch {
                _ = try? HoldFile.removeHold(in: state)
                throw error
            }
            return Switched(from: current, to: previous, hold: hold)
        }
    }

    /// `mirror rollback --release`: removes the hold, under the lock, and switches nothing; the
    /// next sync builds from its manifest as usual. Returns the generation DEST shows and whether
    /// there was a hold to remove.
    public static func release(destination destPath: String, wait: Bool) throws(Failure) -> (current: Int, released: Bool) {
        try locked(destPath, wait: wait) { _, current, state throws in
            (current, try HoldFile.removeHold(in: state))
        }
    }

    /// Runs `body` under DEST's lock with the store (owned by this user), the generation DEST
    /// shows and the store's state folder (``StateOwnership``).
    private static func locked<T>(_ destPath: String, wait: Bool,
                                  _ body: (GenerationStore, Int, FileDescriptor) throws -> T) throws(Failure) -> T {
        do {
            let identity = try DestinationIdentity.resolve(destPath)
            guard let lock = try DestinationLock.take(identity, creating: .nothing, wait: wait) else {
                throw Failure.notAtomic(destPath)
            }
            defer { lock.release() }
            guard lock.stateIsInStore, let store = try GenerationStore.open(identity, create: false),
                  case .generation(let current) = store.current() else {
                throw Failure.notAtomic(destPath)
            }
            try store.requireOwnership()
            let state = try store.stateFolder()
            defer { state.close() }
            return try body(store, current, state)
        } catch let failure as Failure {
            throw failure
        } catch let error as SystemError {
            throw .destination(error)
        } catch let failure as DestinationLock.Failure {
            throw .locked(failure)
        } catch {
            throw .destination(SystemError("roll back", destPath, code: 5))
        }
    }
}
