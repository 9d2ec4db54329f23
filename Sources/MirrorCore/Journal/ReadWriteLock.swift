#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A `pthread_rwlock_t`: any number of readers at once, or one writer.
///
/// Why not `NSLock`: planning asks the journal once per manifest entry from two threads
/// (``Reconciler/forEachAction(in:_:)``); with a mutex they queued behind each other's lookups and
/// slept in the kernel (futex) whenever they met, for lookups that change nothing.
final class ReadWriteLock: @unchecked Sendable {
    private let rwlock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)

    init() {
        rwlock.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(rwlock, nil)
    }

    deinit {
        pthread_rwlock_destroy(rwlock)
        rwlock.deallocate()
    }

    /// Shared: for what only reads.
    func lockForReading() { pthread_rwlock_rdlock(rwlock) }

    /// Exclusive: for what changes the state.
    func lock() { pthread_rwlock_wrlock(rwlock) }

    func unlock() { pthread_rwlock_unlock(rwlock) }
}
