#if canImport(Glibc)
import Glibc
#endif

/// Wakes of ``PartialWriter`` threads that a transfer thread owes, paid once per turn of its loop
/// (``TransferEngine``) instead of once per piece of a body.
///
/// Why: libcurl hands a body to the write callback in pieces of at most `CURL_MAX_WRITE_SIZE`
/// (16 KiB, curl.h), whatever `CURLOPT_BUFFERSIZE` is. Each piece queued for hashing woke the
/// writer, which hashed 16 KiB and went back to sleep: a `futex` wake and a `futex` wait, and two
/// context switches, per 16 KiB (8 × 256 MiB with `--jobs 8`: 324,744 `futex` calls by `strace -c`).
/// The pieces of one `recv` come back to back within one `curl_multi_perform`; while the
/// transfer thread is in that call, a writer is woken only when a buffer is full, and the rest at
/// the end of the call, so it takes what came as one job (``PartialWriter/hash(_:_:)``).
///
/// A wake deferred is never lost: the transfer thread pays its list before it sleeps in
/// `curl_multi_poll`, and a thread that waits for a writer (for a free buffer, or until a file's
/// jobs are done) pays that writer's owed wake before waiting (``PartialWriter``).
final class WriterWakes {
    /// Writers woken late by this thread's current turn; a few at most (one per writer).
    private var owed: [PartialWriter] = []

    /// The list of the turn the calling thread is in (`pthread_getspecific(3)`), nil outside one:
    /// then a writer is woken at once, as any thread but a transfer thread needs.
    static var current: WriterWakes? {
        guard let key, let pointer = pthread_getspecific(key) else { return nil }
        return Unmanaged<WriterWakes>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// nil when `pthread_key_create` failed (`EAGAIN`: the process's keys are used up): then no
    /// wake is deferred, and every one is paid at once, as before this type.
    private static let key: pthread_key_t? = {
        var key = pthread_key_t()
        return pthread_key_create(&key, nil) == 0 ? key : nil
    }()

    /// Runs `body` (one turn of a transfer loop) with the wakes it causes deferred to its end. The
    /// thread-specific value points at `self` unretained: the caller holds `self` for the call.
    func deferring<T>(_ body: () throws -> T) rethrows -> T {
        guard let key = WriterWakes.key else { return try body() }
        pthread_setspecific(key, Unmanaged.passUnretained(self).toOpaque())
        defer {
            pthread_setspecific(key, nil)
            pay()
        }
        return try body()
    }

    /// Notes that `writer` has work it was not woken for.
    func owe(_ writer: PartialWriter) {
        if !owed.contains(where: { $0 === writer }) { owed.append(writer) }
    }

    private func pay() {
        for writer in owed { writer.payOwedWake() }
        owed.removeAll(keepingCapacity: true)
    }
}
