#if canImport(Glibc)
import Glibc
#endif

/// A chain of folders `d/d/d/...` thousands deep, with a file `f` at some depths, for tests of
/// walks and removals that must neither recurse nor hold a descriptor per level. Its full path is
/// longer than `PATH_MAX`, so it is made (and, after a failed test, removed) one `openat` at a
/// time, holding one folder's descriptor.
public enum DeepChain {
    /// Makes `depth` nested folders named `d` in the folder `path`, and a 3-byte file `f` in the
    /// folder at each of `fileDepths` (0: `path` itself).
    public static func make(in path: String, depth: Int, fileDepths: Set<Int>) throws {
        var fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw HarnessError.posix("open(\(path))") }
        defer { close(fd) }
        for level in 0...depth {
            if fileDepths.contains(level) {
                let file = openat(fd, "f", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
                guard file >= 0 else { throw HarnessError.posix("openat(f) at depth \(level)") }
                _ = write(file, "abc", 3)
                close(file)
            }
            guard level < depth else { break }
            guard mkdirat(fd, "d", 0o755) == 0 else { throw HarnessError.posix("mkdirat(d) at depth \(level)") }
            let next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard next >= 0 else { throw HarnessError.posix("openat(d) at depth \(level)") }
            close(fd)
            fd = next
        }
    }

    /// Best effort, for a test whose code under test left the chain: goes down `d` to the bottom,
    /// then back up with `..`, removing each level's other entries and the `d` below it.
    public static func remove(in path: String) {
        var fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        var depth = 0
        while true {
            let next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard next >= 0 else { break }
            close(fd)
            fd = next
            depth += 1
        }
        while true {
            _ = unlinkat(fd, "f", 0)
            _ = unlinkat(fd, "d", AT_REMOVEDIR)
            guard depth > 0 else { break }
            let up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            close(fd)
            guard up >= 0 else { return }
            fd = up
            depth -= 1
        }
        close(fd)
    }

    /// How many levels of `d` are under `path` (0 when none).
    public static func depth(in path: String) -> Int {
        var fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return 0 }
        var depth = 0
        while true {
            let next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard next >= 0 else { break }
            close(fd)
            fd = next
            depth += 1
        }
        close(fd)
        return depth
    }
}
