#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The clock that stamps files, for tests that need a file's times to change, without sleeping a
/// guessed while.
///
/// - Linux stamps a change with a coarse clock (`CLOCK_REALTIME_COARSE`, one tick every few
///   milliseconds; since 6.13 a finer one for a file whose times were just read). A file written
///   twice within one tick keeps its times, so mirror cannot see the second write.
///   ``waitUntilPast(_:)`` waits for the state that guarantees it: the coarse clock is past the
///   file's times, so any later change stamps later times.
/// - nginx's validators (`ETag`, `Last-Modified`) are the mtime in whole seconds and the size.
///   ``giveNewValidators(_:previous:)`` stamps a rewritten file with another second instead of
///   waiting one out.
public enum FileClock {
    /// A file's modification and change times (`stat`), nil when it cannot be read.
    public static func times(of path: String) -> (modified: timespec, changed: timespec)? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return (st.st_mtim, st.st_ctim)
    }

    /// Waits until the coarse clock that stamps files is past `time`: a file changed after this
    /// returns gets times later than `time`.
    public static func waitUntilPast(_ time: timespec, timeout: Double = 5) throws {
        try Wait.until("the file clock passed \(time.tv_sec).\(time.tv_nsec)", timeout: timeout) {
            var now = timespec()
            clock_gettime(CLOCK_REALTIME_COARSE, &now)
            return (now.tv_sec, now.tv_nsec) > (time.tv_sec, time.tv_nsec)
        }
    }

    /// Waits until the file clock is past both times of the file at `path` (nothing to wait for
    /// when there is no file).
    public static func waitUntilPastTimes(of path: String, timeout: Double = 5) throws {
        guard let (modified, changed) = times(of: path) else { return }
        let later = (modified.tv_sec, modified.tv_nsec) > (changed.tv_sec, changed.tv_nsec) ? modified : changed
        try waitUntilPast(later, timeout: timeout)
    }

    /// Sets the modification time of the file at `path` (`utimensat`; the access time is kept).
    public static func setModificationTime(of path: String, to time: timespec) throws {
        let omit = (1 << 30) - 2  // UTIME_OMIT (a macro Swift does not import): the access time stays
        var times = [timespec(tv_sec: 0, tv_nsec: omit), time]
        guard utimensat(AT_FDCWD, path, &times, 0) == 0 else { throw HarnessError.posix("utimensat(\(path))") }
    }

    /// Stamps the file at `path`, just rewritten, with a modification time in another whole second
    /// than `previous` (the mtime of the version it replaced), so nginx gives it a new `ETag` and
    /// `Last-Modified` even when it is rewritten within the same second with the same size.
    /// Two seconds earlier, not later: a later stamp could be the very second of the next plain
    /// rewrite, while the next rewrite is never stamped earlier than this one's `previous`.
    public static func giveNewValidators(_ path: String, previous: timespec) throws {
        try setModificationTime(of: path, to: timespec(tv_sec: previous.tv_sec - 2, tv_nsec: previous.tv_nsec))
    }
}
