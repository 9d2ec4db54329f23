#if canImport(Glibc)
import Glibc
#endif

/// Named places where a test can have the process killed with a real SIGKILL, to prove that a
/// crash exactly there (between an fsync and its journal record, in the middle of a compaction)
/// still ends correct. Set `MIRROR_CRASH_AT=<name>` in the environment; without it, ``hit(_:)`` is
/// one comparison against a value read once at start-up.
///
/// The names: `checkpoint-before-record`, `install-before-record`, `compact-before-rename`,
/// `compact-after-rename`, `turn-before-remove`, `turn-before-rename` (``Installer``, a path that
/// turns between file and folder).
public enum CrashPoint {
    static let armed: String? = getenv("MIRROR_CRASH_AT").map { String(cString: $0) }

    @inline(__always)
    public static func hit(_ name: StaticString) {
        guard let armed, armed == name.description else { return }
        kill(getpid(), SIGKILL)
    }
}
