#if canImport(Glibc)
import Glibc
#endif

/// Runs a helper program and waits for it (`posix_spawn`, `waitpid`): gpgv for OpenPGP
/// signatures. Its standard input is /dev/null and its output goes to files, so that no pipe can
/// fill while this waits. The environment is the runner's.
package enum Spawn {
    package struct Failure: Error, CustomStringConvertible {
        package var program: String
        package var errno: Int32
        package var description: String { "cannot run \(program): \(String(cString: strerror(errno)))" }
    }

    /// The exit status (128 + the signal's number when a signal ended it).
    package static func run(_ argv: [String], stdout: String, stderr: String) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // No O_CLOEXEC: these are the child's own standard descriptors, which exec must keep.
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var arguments = argv.map { strdup($0) }
        defer { arguments.forEach { free($0) } }
        arguments.append(nil)
        var pid: pid_t = 0
        let code = posix_spawn(&pid, argv[0], &actions, nil, arguments, environ)
        guard code == 0 else { throw Failure(program: argv[0], errno: code) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw Failure(program: argv[0], errno: errno) }
        }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// `name` on `PATH`, or nil.
    package static func find(_ name: String) -> String? {
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }
}
