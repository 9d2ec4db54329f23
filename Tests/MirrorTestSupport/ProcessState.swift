import Foundation

/// What `/proc` tells about a running process, for conditions to wait on (``Wait``).
public enum ProcessState {
    /// Whether process `pid` has a handler installed for `signal` (`SigCgt` in
    /// `/proc/PID/status`): from then on the signal is the program's to handle, not a kill.
    public static func catches(_ pid: pid_t, _ signal: Int32) -> Bool {
        mask("SigCgt", of: pid).map { $0 & (1 << UInt64(signal - 1)) != 0 } ?? false
    }

    /// Whether `signal` is still pending for process `pid` (`ShdPnd` or `SigPnd`): sent, not yet
    /// delivered. A second signal of the same number sent while the first is pending is merged
    /// with it.
    public static func hasPending(_ pid: pid_t, _ signal: Int32) -> Bool {
        let bit: UInt64 = 1 << UInt64(signal - 1)
        return ((mask("ShdPnd", of: pid) ?? 0) | (mask("SigPnd", of: pid) ?? 0)) & bit != 0
    }

    /// Whether the main thread of process `pid` is asleep in `nanosleep` or `clock_nanosleep`
    /// (`/proc/PID/syscall`): a program that sleeps in steps while it waits (for a lock, out a
    /// jitter delay) is in its waiting loop.
    public static func isInTimedSleep(_ pid: pid_t) -> Bool {
#if arch(x86_64)
        let calls: Set<Int> = [35, 230]
#elseif arch(arm64)
        let calls: Set<Int> = [101, 115]
#else
        let calls: Set<Int> = []
#endif
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/syscall", encoding: .utf8),
              let first = text.split(separator: " ").first, let number = Int(first.trimmingCharacters(in: .whitespacesAndNewlines))
        else { return false }
        return calls.contains(number)
    }

    /// Whether process `pid` has a descriptor open on a path ending in `suffix` (`/proc/PID/fd`).
    public static func hasOpen(_ pid: pid_t, endingIn suffix: String) -> Bool {
        guard let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return false }
        return fds.contains { fd in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"))?.hasSuffix(suffix) == true
        }
    }

    private static func mask(_ field: String, of pid: pid_t) -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            return UInt64(line.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces), radix: 16)
        }
        return nil
    }
}
