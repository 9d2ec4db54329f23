#if canImport(Glibc)
import Glibc
#endif

/// Seconds since the epoch, from `clock_gettime(CLOCK_REALTIME)`: for timestamps and HTTP dates.
public func currentUnixTime() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Seconds from an arbitrary start, from `CLOCK_MONOTONIC`: for deadlines and back-off, which must
/// not jump when the wall clock is adjusted.
public func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
