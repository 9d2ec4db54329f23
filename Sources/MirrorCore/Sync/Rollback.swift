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

    /// Switches DEST to the newest complete generation older than the current one; returns both
    /// numbers. The lock is taken first and the current generation read after it: a rollback
    /// that waited behind a publishing sync goes back from what that sync published.
    public static func run(destination destPath: String, wait: Bool) throws(Failure) -> (from: Int, to: Int) {
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
            guard let previous = try store.generations().last(where: { $0 < current }) else {
                throw Failure.noEarlierGeneration(destPath, current: current)
            }
            try store.switchTo(previous)
            return (current, previous)
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
