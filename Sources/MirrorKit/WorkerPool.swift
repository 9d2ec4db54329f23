import CLinux
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Runs a body for every index of a collection on a few threads, one per online core by default.
///
/// Why threads rather than the transfer loop or Dispatch: hashing is CPU-bound and blocks in
/// `pread(2)`, so `verify` and `manifest create` want exactly as many busy threads as cores
/// (``coreCount``), each taking the next index from a shared counter, so one
/// large file never leaves the other cores idle while small files wait behind it.
public enum WorkerPool {
    /// The cores this process may use: its CPU affinity (`taskset`, a container's CPU set; else
    /// the online cores), and no more than a cgroup CPU quota allows, rounded up (``CPUQuota``:
    /// a container given 1.5 CPUs gets 2 threads), at least 1. Read once.
    public static let coreCount: Int = {
        let allowed = Int(mirror_allowed_cpus())
        let cores = max(1, allowed > 0 ? allowed : Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        guard let quota = CPUQuota.current() else { return cores }
        return max(1, min(cores, Int(quota.rounded(.up))))
    }()

    /// Calls `body(index)` for every index in `0..<count`, on `threads` threads (capped at `count`),
    /// and returns once every call has returned. `body` must be thread-safe; `onIdle` runs on the
    /// calling thread about every `idleInterval` seconds while the work goes on (progress drawing).
    public static func run(count: Int, threads: Int = WorkerPool.coreCount,
                           idleInterval: Double = 0.1, onIdle: (() -> Void)? = nil,
                           _ body: @escaping @Sendable (Int) -> Void) {
        guard count > 0 else { return }
        /// The next index to hand out.
        let next = Locked(0)
        let workers = max(1, min(threads, count))
        let finished = DispatchSemaphore(value: 0)
        for _ in 0..<workers {
            SystemThread.start(name: "mirror-worker", stackSize: 1 << 20) {
                while let index = next.withLock({ (next: inout Int) -> Int? in
                    guard next < count else { return nil }
                    next += 1
                    return next - 1
                }) { body(index) }
                finished.signal()
            }
        }
        var remaining = workers
        while remaining > 0 {
            if let onIdle {
                if finished.wait(timeout: .now() + idleInterval) == .success { remaining -= 1 } else { onIdle() }
            } else {
                finished.wait()
                remaining -= 1
            }
        }
    }
}
