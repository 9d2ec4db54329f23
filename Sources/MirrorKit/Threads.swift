import CLinux
#if canImport(Glibc)
import Glibc
#endif

// Threads, locks, read-write locks and conditions on pthreads directly.
//
// Why not Foundation's `Thread`, `NSLock` and `NSCondition`: they are in Foundation proper, and
// importing it maps libFoundation, FoundationInternationalization and ICU's data, about 7 MB
// resident in every run of the tool (a one-line program: 17.9 MB with Foundation, 10.6 MB with
// FoundationEssentials alone). Everything else the tool uses of Foundation (`JSONEncoder`,
// `ProcessInfo`) is in FoundationEssentials (docs/performance.md, "Memory before any work").

/// A mutex (`pthread_mutex_lock(3)`). The mutex lives in memory of its own, never moved.
///
/// Its calls, and ``ReadWriteLock``'s, are inlinable: the modules above take them around every
/// lookup (the journal's, once per manifest entry), and inlined they cost what they cost when all
/// of this was one module, the `pthread` call and nothing more.
///
/// Sendable, unchecked: its one stored property, the pointer to the mutex, is set in `init` and
/// never changed; the `pthread_mutex_t` it points to is made to be locked from any thread.
package final class Lock: @unchecked Sendable {
    /// Also the mutex of a ``Condition`` built on this lock.
    @usableFromInline let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    package init() {
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    @inlinable package func lock() { pthread_mutex_lock(mutex) }
    @inlinable package func unlock() { pthread_mutex_unlock(mutex) }

    @inlinable package func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A little mutable state that threads share, kept with its own lock: counters, per-index
/// results, a clock, a queue. A type that holds its changing state in one of these and everything
/// else in `let`s of `Sendable` types is checked-`Sendable` itself, so the one `@unchecked` is
/// here. The model is swift-nio's `NIOLockedValueBox`, and for a thread that waits for the state
/// to change, its `ConditionLock` (``withLock(waitingUntil:idle:_:)``, ``broadcast()``).
///
/// Sendable, unchecked: `value` is read and written only inside ``withLock(_:)`` and
/// ``withLock(waitingUntil:idle:_:)``, with the lock held; and `State` is `Sendable`, so what a
/// body copies in or out may go to any thread.
package final class Locked<State: Sendable>: @unchecked Sendable {
    /// Its mutex is the lock; its condition variable wakes the threads waiting for a change.
    @usableFromInline let condition = Condition()
    @usableFromInline var value: State

    package init(_ value: State) { self.value = value }

    /// Runs `body` on the state with the lock held.
    @inlinable package func withLock<T>(_ body: (inout State) throws -> T) rethrows -> T {
        condition.lock()
        defer { condition.unlock() }
        return try body(&value)
    }

    /// Waits until `ready` holds of the state (`pthread_cond_wait(3)`: the lock is let go while
    /// asleep), then runs `body` on it; the lock is held from the last test to the end of `body`.
    /// `ready` may change the state (a wake it owes, say) but runs again after every wake-up.
    /// The time asleep counts in `idle`, when given.
    package func withLock<T>(waitingUntil ready: (inout State) -> Bool, idle: IdleClock? = nil,
                             _ body: (inout State) throws -> T) rethrows -> T {
        condition.lock()
        defer { condition.unlock() }
        if !ready(&value) {
            idle?.beginWait()
            repeat { condition.wait() } while !ready(&value)
            idle?.endWait()
        }
        return try body(&value)
    }

    /// Wakes every thread waiting in ``withLock(waitingUntil:idle:_:)`` to test its condition
    /// again: call after a change one may wait for (with the lock held or not).
    package func broadcast() { condition.broadcast() }
}

/// A `pthread_rwlock_t`: any number of readers at once, or one writer.
///
/// Why not ``Lock``: planning asks the journal once per manifest entry from a thread per core
/// (`Reconciler.forEachAction(in:window:threads:known:_:)`); with a mutex they queued behind each other's lookups and
/// slept in the kernel (futex) whenever they met, for lookups that change nothing.
///
/// Sendable, unchecked: its one stored property, the pointer to the lock, is set in `init` and
/// never changed; the `pthread_rwlock_t` it points to is made to be taken from any thread.
package final class ReadWriteLock: @unchecked Sendable {
    @usableFromInline let rwlock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)

    package init() {
        rwlock.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(rwlock, nil)
    }

    deinit {
        pthread_rwlock_destroy(rwlock)
        rwlock.deinitialize(count: 1)
        rwlock.deallocate()
    }

    /// Shared: for what only reads.
    @inlinable package func lockForReading() { pthread_rwlock_rdlock(rwlock) }

    /// Exclusive: for what changes the state.
    @inlinable package func lock() { pthread_rwlock_wrlock(rwlock) }

    @inlinable package func unlock() { pthread_rwlock_unlock(rwlock) }
}

/// A mutex with a condition variable (`pthread_cond_wait(3)`), used as `NSCondition` was: lock,
/// test the predicate in a loop around ``wait()``, unlock. Timed waits count on
/// `CLOCK_MONOTONIC` (`pthread_condattr_setclock`), so a change of the wall clock neither
/// shortens nor stretches them.
///
/// Sendable, unchecked: its stored properties, a ``Lock`` and the pointer to the condition
/// variable, are set in `init` and never changed; `pthread_cond_t` is made to be waited on and
/// signalled from any thread (with the lock held where `pthread_cond_wait(3)` says so).
package final class Condition: @unchecked Sendable {
    @usableFromInline let mutex = Lock()
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    package init() {
        cond.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(cond)
        cond.deinitialize(count: 1)
        cond.deallocate()
    }

    @inlinable package func lock() { mutex.lock() }
    @inlinable package func unlock() { mutex.unlock() }
    /// Waits for a signal; the lock must be held. May wake without one: test the predicate again.
    package func wait() { pthread_cond_wait(cond, mutex.mutex) }
    package func signal() { pthread_cond_signal(cond) }
    package func broadcast() { pthread_cond_broadcast(cond) }

    /// Waits for a signal at most `seconds`; the lock must be held. Returns false on timeout.
    @discardableResult
    package func wait(seconds: Double) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        // At most a day: every caller waits far less, and the sum below stays in range.
        let wait = seconds.isNaN ? 0 : min(max(0, seconds), 86_400)
        let whole = Int(wait.rounded(.down))
        var deadline = timespec(tv_sec: now.tv_sec + whole, tv_nsec: now.tv_nsec + Int((wait - Double(whole)) * 1e9))
        if deadline.tv_nsec >= 1_000_000_000 {
            deadline.tv_sec += 1
            deadline.tv_nsec -= 1_000_000_000
        }
        return pthread_cond_timedwait(cond, mutex.mutex, &deadline) == 0
    }
}

/// Starts detached threads (`pthread_create(3)`), named for `top -H` and /proc/PID/task/*/comm.
package enum SystemThread {
    /// The closure travels to the new thread retained (`Unmanaged`) and is released there.
    private final class Body {
        let name: String
        let run: () -> Void
        init(name: String, run: @escaping () -> Void) { self.name = name; self.run = run }
    }

    /// Runs `body` on a new detached thread named `name` (at most 15 bytes reach the kernel).
    /// `stackSize` nil keeps the system's default (8 MiB of address space, touched as used).
    package static func start(name: String, stackSize: Int? = nil, _ body: @escaping () -> Void) {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        if let stackSize { pthread_attr_setstacksize(&attributes, max(stackSize, Int(PTHREAD_STACK_MIN))) }
        let context = Unmanaged.passRetained(Body(name: name, run: body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, &attributes, { context in
            guard let context else { return nil }
            let body = Unmanaged<Body>.fromOpaque(context).takeRetainedValue()
            _ = mirror_name_thread(body.name)
            body.run()
            return nil
        }, context)
        // Without a thread the run cannot go on, and nothing else could report it better: the
        // kernel refused a thread (EAGAIN: out of memory or over RLIMIT_NPROC).
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            fatalError("cannot start thread \(name): \(String(cString: strerror(result)))")
        }
    }
}
