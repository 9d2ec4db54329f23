#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MirrorKit

/// What a finished child process left behind.
public struct ProcessResult: Sendable, CustomStringConvertible {
    /// The exit status, or `128 + N` when the process was killed by signal `N` (the shell's
    /// convention, so a test can compare one number either way).
    public var exitCode: Int32
    /// The signal that killed the process, or nil when it exited normally.
    public var signal: Int32?
    public var stdout: String
    public var stderr: String
    /// The child's peak resident set size (`ru_maxrss` from `wait4`, kilobytes on Linux).
    /// Caution: at exec, Linux folds the spawning process's own high-water RSS into the child's
    /// (posix_spawn shares the parent's memory until exec), so this is at least the test runner's
    /// peak. To measure a program's memory, run it under `/usr/bin/time -f %M`.
    public var maxRSSKilobytes: Int
    /// Time from spawn to reap. For reports and diagnostics only: the project bans timing assertions.
    public var wallSeconds: Double

    public init(exitCode: Int32, signal: Int32?, stdout: String, stderr: String, maxRSSKilobytes: Int, wallSeconds: Double) {
        self.exitCode = exitCode
        self.signal = signal
        self.stdout = stdout
        self.stderr = stderr
        self.maxRSSKilobytes = maxRSSKilobytes
        self.wallSeconds = wallSeconds
    }

    public var description: String {
        let how = signal.map { "killed by signal \($0)" } ?? "exit code \(exitCode)"
        return "\(how)\n--- stdout ---\n\(tail(stdout))\n--- stderr ---\n\(tail(stderr))"
    }
}

/// Thrown when a child outlives its time limit. The process group has already been killed with
/// SIGKILL and reaped; `result` holds what it had written so far.
public struct ProcessTimeoutError: Error, CustomStringConvertible {
    public let command: [String]
    public let timeout: Double
    public let result: ProcessResult

    public var description: String {
        "process timed out after \(timeout) s and was killed (SIGKILL to its process group): "
            + command.joined(separator: " ")
            + "\n--- stdout (tail) ---\n\(tail(result.stdout, maxBytes: 2048))"
            + "\n--- stderr (tail) ---\n\(tail(result.stderr))"
    }
}

/// A child process started with `posix_spawn`, in its own process group, with stdin from
/// `/dev/null` and stdout/stderr going to files.
///
/// Why these choices:
/// - Files, not pipes, for output: a child that writes more than a pipe buffer while the test waits
///   for it to exit would deadlock; files also survive a timeout, so the error can quote them.
/// - Its own process group: a timeout or `deinit` kills the whole group with SIGKILL, so helpers the
///   child started (a shell's `sleep`, say) cannot outlive the test. After the child exits, any
///   process left in its group is killed too, before the child is reaped (while the zombie still
///   pins the group id, so the kill cannot hit an unrelated process that reused the id).
/// - `posix_spawn` rather than Foundation's `Process`: it lets us set the process group and the
///   signal state atomically, and the child is reaped with `wait4`, which yields that child's own
///   `ru_maxrss` for memory checks.
/// - Signal dispositions are reset to default and the mask cleared in the child, because the test
///   runner may ignore SIGPIPE and an ignored signal survives `exec`.
/// - Descriptors other than 0, 1, 2 are closed in the child (when glibc has
///   `posix_spawn_file_actions_addclosefrom_np`), so a socket another parallel test holds open is
///   not inherited by, say, nginx, which would keep the connection alive behind the test's back.
///
/// A `ChildProcess` is meant to be used from one test at a time; it is not thread-safe.
public final class ChildProcess {
    /// The child's process id (also its process group id).
    public let pid: pid_t
    /// The command as started (executable first), for messages.
    public let command: [String]
    /// Files receiving the child's stdout and stderr; readable while it runs.
    public let stdoutPath: String
    public let stderrPath: String

    private let outputDirectory: TemporaryDirectory
    private let startTime: Double
    private var finished: ProcessResult?

    /// Starts `executable` (a path, or a bare name looked up in the test runner's `PATH`).
    ///
    /// - Parameters:
    ///   - environment: added to (and overriding) the test runner's environment.
    ///   - cwd: working directory of the child; defaults to the runner's.
    public init(_ executable: String, _ args: [String] = [], environment: [String: String] = [:], cwd: String? = nil) throws {
        outputDirectory = try TemporaryDirectory(prefix: "mirror-proc")
        stdoutPath = outputDirectory.path("stdout")
        stderrPath = outputDirectory.path("stderr")
        command = [executable] + args

        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }

        // Without addchdir_np (glibc < 2.29), change folder in a shell and exec the real program;
        // the folder and arguments go in as positional parameters, so nothing needs quoting.
        var program = executable
        var argv = [executable] + args
        let chdirAction = SpawnSymbols.addchdir
        if let cwd = cwd, chdirAction == nil {
            program = "/bin/sh"
            argv = ["/bin/sh", "-c", "cd -- \"$0\" && exec \"$@\"", cwd, executable] + args
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        func check(_ rc: Int32, _ what: String) throws {
            if rc != 0 { throw HarnessError.posix("\(what) for \(executable)", errno: rc) }
        }
        try check(posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0), "addopen(/dev/null)")
        try check(posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644), "addopen(stdout)")
        try check(posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644), "addopen(stderr)")
        if let closeFrom = SpawnSymbols.addclosefrom {
            try check(closeFrom(&actions, 3), "addclosefrom_np")
        }
        if let cwd = cwd, let addchdir = chdirAction {
            try check(cwd.withCString { addchdir(&actions, $0) }, "addchdir_np(\(cwd))")
        }

        var defaultSignals = sigset_t()
        sigemptyset(&defaultSignals)
        for sig in [SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM, SIGXFSZ] {
            sigaddset(&defaultSignals, sig)
        }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        try check(posix_spawnattr_setsigdefault(&attributes, &defaultSignals), "setsigdefault")
        try check(posix_spawnattr_setsigmask(&attributes, &emptyMask), "setsigmask")
        try check(posix_spawnattr_setpgroup(&attributes, 0), "setpgroup")
        let flags = Int32(POSIX_SPAWN_SETPGROUP) | Int32(POSIX_SPAWN_SETSIGDEF) | Int32(POSIX_SPAWN_SETSIGMASK)
        try check(posix_spawnattr_setflags(&attributes, Int16(flags)), "setflags")

        let cArgs = argv.map { strdup($0) } + [nil]
        let cEnv = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            cArgs.forEach { free($0) }
            cEnv.forEach { free($0) }
        }
        var child: pid_t = 0
        let rc: Int32
        if program.contains("/") {
            rc = posix_spawn(&child, program, &actions, &attributes, cArgs, cEnv)
        } else {
            rc = posix_spawnp(&child, program, &actions, &attributes, cArgs, cEnv)
        }
        guard rc == 0 else {
            throw HarnessError.posix("posix_spawn \(command.joined(separator: " "))" + (cwd.map { " in \($0)" } ?? ""), errno: rc)
        }
        pid = child
        startTime = monotonicSeconds()
    }

    deinit {
        if finished == nil {
            kill(-pid, SIGKILL)
            _ = try? reap()
        }
    }

    /// Runs a command to completion and returns its result (a non-zero exit is not an error).
    /// At `timeout` seconds the process group is killed and ``ProcessTimeoutError`` is thrown; its
    /// description includes the tail of the child's stderr.
    @discardableResult
    public static func run(_ executable: String, _ args: [String], environment: [String: String] = [:],
                           cwd: String? = nil, timeout: Double = 120) throws -> ProcessResult {
        let process = try ChildProcess(executable, args, environment: environment, cwd: cwd)
        return try process.wait(timeout: timeout)
    }

    /// True until the child has exited (it may still be a zombie that ``wait(timeout:)`` will reap).
    public var isRunning: Bool { finished == nil && !hasExited() }

    /// Sends `sig` to the child (or to its whole process group). Does nothing once the child has
    /// been reaped, since its pid may by then belong to an unrelated process.
    public func signal(_ sig: Int32, toGroup: Bool = false) {
        guard finished == nil else { return }
        kill(toGroup ? -pid : pid, sig)
    }

    /// What the child has written to stdout so far (it may still be running).
    public func currentStdout() throws -> String { try Self.readText(stdoutPath) }

    /// What the child has written to stderr so far (it may still be running).
    public func currentStderr() throws -> String { try Self.readText(stderrPath) }

    /// Waits for the child to exit and returns its result; later calls return the same result.
    /// At `timeout` seconds the process group is killed with SIGKILL, reaped, and
    /// ``ProcessTimeoutError`` is thrown.
    @discardableResult
    public func wait(timeout: Double = 120) throws -> ProcessResult {
        if let done = finished { return done }
        let deadline = monotonicSeconds() + timeout
        var delay = 0.001
        while !hasExited() {
            if monotonicSeconds() >= deadline {
                kill(-pid, SIGKILL)
                let result = try reap()
                throw ProcessTimeoutError(command: command, timeout: timeout, result: result)
            }
            sleepSeconds(delay)
            delay = min(delay * 2, 0.02)
        }
        // The leader is a zombie, so its pid still names our group: kill any stragglers it left.
        kill(-pid, SIGKILL)
        return try reap()
    }

    /// Polls without reaping (WNOWAIT), so the zombie keeps the pid and group id reserved until
    /// ``reap()``.
    private func hasExited() -> Bool {
        while true {
            var info = siginfo_t()
            if waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 {
                return info.si_signo == SIGCHLD
            }
            if errno == EINTR { continue }
            return true  // ECHILD: nothing left to wait for; reap() reports it.
        }
    }

    /// Collects the exit status and the child's resource usage with `wait4`.
    private func reap() throws -> ProcessResult {
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) == -1 {
            if errno == EINTR { continue }
            let error = HarnessError.posix("wait4(\(pid)) for \(command.joined(separator: " "))")
            finished = ProcessResult(exitCode: -1, signal: nil, stdout: "", stderr: "", maxRSSKilobytes: 0, wallSeconds: 0)
            throw error
        }
        let wall = monotonicSeconds() - startTime
        let termSignal = status & 0x7f
        let exitCode: Int32
        let signal: Int32?
        if termSignal == 0 {
            exitCode = (status >> 8) & 0xff
            signal = nil
        } else {
            exitCode = 128 + termSignal
            signal = termSignal
        }
        // Mark as reaped before reading output, so a read error cannot lead deinit to kill a
        // recycled pid.
        finished = ProcessResult(exitCode: exitCode, signal: signal, stdout: "", stderr: "",
                                 maxRSSKilobytes: Int(usage.ru_maxrss), wallSeconds: wall)
        let result = ProcessResult(exitCode: exitCode, signal: signal,
                                   stdout: try Self.readText(stdoutPath), stderr: try Self.readText(stderrPath),
                                   maxRSSKilobytes: Int(usage.ru_maxrss), wallSeconds: wall)
        finished = result
        return result
    }

    static func readText(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw HarnessError("cannot read process output file \(path)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

/// glibc extensions looked up at run time, so the harness still builds and works (through the
/// documented fallbacks) on a libc that lacks them.
private enum SpawnSymbols {
    typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32
    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32

    static let addchdir: AddChdir? = lookup("posix_spawn_file_actions_addchdir_np")
    static let addclosefrom: AddCloseFrom? = lookup("posix_spawn_file_actions_addclosefrom_np")

    private static func lookup<T>(_ name: String) -> T? {
        // A nil handle is RTLD_DEFAULT: search the libraries already loaded.
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }
        return unsafeBitCast(symbol, to: T.self)
    }
}
