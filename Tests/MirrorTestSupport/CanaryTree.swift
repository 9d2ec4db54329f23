#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A tree of files outside DEST that `mirror` must never touch, and a fingerprint of it.
///
/// Confinement tests point planted symlinks into this tree and compare ``snapshot()`` before and
/// after a run: every file's SHA-256, mode, size and mtime (nanoseconds), every folder's mode and
/// listing, every symlink's target, all taken with `lstat` so nothing is followed. A write,
/// truncation, chmod, utimes, create or delete anywhere in the tree changes the snapshot.
public final class CanaryTree {
    public let root: String

    /// Creates `root` with a few folders and files (content derived from their names), each file
    /// with a distinctive mode and an old mtime, so that an accidental chmod or utimes shows too.
    /// `layout` lists relative file paths; their folders are created.
    public init(at root: String, layout: [String]) throws {
        self.root = root
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        for (index, relative) in layout.enumerated() {
            let path = root + "/" + relative
            let folder = (path as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            _ = try TestData.writeFile(at: path, size: Int64(1000 + index * 37), seed: UInt64(9000 + index))
            guard chmod(path, 0o640) == 0 else { throw HarnessError.posix("chmod \(path)") }
            var times = [timespec(tv_sec: 1_000_000_000 + index, tv_nsec: 123_456_789),
                         timespec(tv_sec: 1_000_000_000 + index, tv_nsec: 123_456_789)]
            guard utimensat(AT_FDCWD, path, &times, 0) == 0 else { throw HarnessError.posix("utimensat \(path)") }
        }
    }

    /// One line per object under the root, sorted: `path type mode size mtime sha256-or-target`.
    public func snapshot() throws -> [String] {
        var lines: [String] = []
        try walk("", into: &lines)
        return lines.sorted()
    }

    private func walk(_ relative: String, into lines: inout [String]) throws {
        let path = relative.isEmpty ? root : root + "/" + relative
        var st = stat()
        guard lstat(path, &st) == 0 else { throw HarnessError.posix("lstat \(path)") }
        let mode = String(st.st_mode & 0o7777, radix: 8)
        let mtime = "\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)"
        switch st.st_mode & S_IFMT {
        case S_IFDIR:
            lines.append("\(relative.isEmpty ? "." : relative) dir \(mode)")
            let names = try FileManager.default.contentsOfDirectory(atPath: path).sorted()
            for name in names { try walk(relative.isEmpty ? name : relative + "/" + name, into: &lines) }
        case S_IFREG:
            lines.append("\(relative) file \(mode) \(st.st_size) \(mtime) links=\(st.st_nlink) \(try TestData.sha256(ofFileAt: path))")
        case S_IFLNK:
            let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? "?"
            lines.append("\(relative) symlink -> \(target)")
        default:
            lines.append("\(relative) other \(mode)")
        }
    }

    /// Whether a process of this user could create or truncate a file at `path` by following
    /// symlinks: the path (or, when it does not exist yet, its folder) resolves (through any links) to a writable folder inside this tree.
    /// Confinement tests assert it before the run, so that they could fail: a `mirror` that opened
    /// paths naively would have written into the canary.
    public func wouldReceiveWrite(at path: String) -> Bool {
        // An existing path (a link to a canary file) resolves itself; a new one, through its folder.
        let folder = (path as NSString).deletingLastPathComponent
        guard let resolved = realpath(path, nil) ?? realpath(folder, nil) else { return false }
        defer { free(resolved) }
        let real = String(cString: resolved)
        return (real == root || real.hasPrefix(root + "/")) && access(real, W_OK) == 0
    }
}
