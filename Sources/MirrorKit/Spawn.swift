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

/// A private folder for a helper's files (`mkdtemp` under `TMPDIR`, else /tmp), removed with
/// what it holds: the files are named by the caller and never nested deeper than one folder.
package final class Scratch {
    package let root: String

    package init() throws {
        let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((base + "/mirror-XXXXXX").utf8CString)
        guard mkdtemp(&template) != nil else { throw Spawn.Failure(program: "mkdtemp", errno: errno) }
        root = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    package func path(_ name: String) -> String { root + "/" + name }

    /// A folder in it, private to this user (mode 0700), for a helper's own home.
    package func makeFolder(_ name: String) throws -> String {
        let folder = path(name)
        guard mkdir(folder, 0o700) == 0 || errno == EEXIST else { throw Spawn.Failure(program: "mkdir", errno: errno) }
        return folder
    }

    package func write(_ name: String, _ bytes: [UInt8]) throws {
        let fd = open(path(name), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Spawn.Failure(program: "open", errno: errno) }
        defer { close(fd) }
        var done = 0
        while done < bytes.count {
            let wrote = bytes[done...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if wrote < 0 {
                if errno == EINTR { continue }
                throw Spawn.Failure(program: "write", errno: errno)
            }
            done += wrote
        }
    }

    /// Removes every file and folder one level down, then the folder.
    package func remove() {
        guard let dir = opendir(root) else { return }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        closedir(dir)
        for name in names {
            let inner = path(name)
            if unlink(inner) != 0, let sub = opendir(inner) {
                var files: [String] = []
                while let entry = readdir(sub) {
                    let file = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                    if file != "." && file != ".." { files.append(file) }
                }
                closedir(sub)
                for file in files { unlink(inner + "/" + file) }
                rmdir(inner)
            }
        }
        rmdir(root)
    }
}
