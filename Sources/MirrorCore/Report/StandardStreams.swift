import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// Standard output and standard error as C streams, for the reports that write with `fputs`.
///
/// Glibc's `stdout` and `stderr` are mutable C globals, which Swift 6's strict concurrency refuses
/// to read from code that may run on any thread; the C shim returns them from a function
/// (`mirror_stdout`, `mirror_stderr`). Each `FILE` locks around every call (flockfile(3)), so the
/// sync thread and a progress redraw may both write.
public enum StandardStreams {
    public static var output: UnsafeMutablePointer<FILE> { mirror_stdout() }
    public static var error: UnsafeMutablePointer<FILE> { mirror_stderr() }
}
