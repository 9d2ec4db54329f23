#if canImport(Glibc)
import Glibc
#endif

/// Named places where a test can have the process killed with a real SIGKILL, to prove that a
/// crash exactly there (between an fsync and its journal record, in the middle of a compaction)
/// still ends correct. Set `MIRROR_CRASH_AT=<name>` in the environment; without it, ``hit(_:)`` is
/// one comparison against a value read once at start-up.
///
/// The names: `checkpoint-before-record`, `install-before-record`, `compact-before-rename`,
/// `compact-after-rename`, `turn-before-remove`, `turn-before-rename` (`Installer`, a path that
/// turns between file and folder), `prune-mid-removal` (a generation being pruned, renamed out of
/// the list, before its files are removed).
///
/// `MIRROR_STOP_AT=<name>` stops the process there instead (`SIGSTOP`, as a scheduler might at
/// any instant), so that a test can look at DEST with another command at exactly that moment and
/// then let the run go on (`SIGCONT`): `seed-after-links` (an atomic run has linked the unchanged
/// files into the next generation, their journal records not yet refreshed), `publish-after-prune`
/// (old generations pruned, records not yet refreshed), `seed-after-walk` (the `--seed` folders
/// walked, no seed file opened yet: a test swaps a folder for a link there).
public enum CrashPoint {
    @usableFromInline static let armed: String? = getenv("MIRROR_CRASH_AT").map { String(cString: $0) }
    @usableFromInline static let stopAt: String? = getenv("MIRROR_STOP_AT").map { String(cString: $0) }

    /// Inlinable, so that a call from the modules above costs the comparison and no call.
    @inlinable @inline(__always)
    public static func hit(_ name: StaticString) {
        if let stopAt, stopAt == name.description { raise(SIGSTOP) }
        guard let armed, armed == name.description else { return }
        kill(getpid(), SIGKILL)
    }
}
