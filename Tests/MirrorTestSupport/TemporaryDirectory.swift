#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// A fresh, private folder for one test, removed with everything in it when the object goes away.
///
/// Why a class with `deinit` rather than a `defer { remove }` in each test: the folder is then
/// cleaned up on every path out of the test, including a thrown error or a failed `#require`, and
/// objects that need a folder for their whole life (``ChildProcess`` output files, ``NginxServer``'s
/// prefix) can simply hold one.
///
/// The folder is made with `mkdtemp`, so it is mode 0700 and its name cannot collide with another
/// test running in parallel. Removal never follows symbolic links (a test may plant a link to a
/// folder it does not own, e.g. to check that `mirror` does not follow it either), and it first
/// makes read-only folders writable, because tests deliberately create those to provoke `EACCES`.
///
/// Set `MIRROR_KEEP_TEST_DIRS=1` to keep the folders for a post-mortem; their paths are printed on
/// stderr.
public final class TemporaryDirectory {
    /// Absolute, symlink-free path of the folder (no trailing slash).
    public let path: String

    /// Creates `$TMPDIR/<prefix>.XXXXXX` (or under `/tmp` when `TMPDIR` is unset or empty).
    public init(prefix: String = "mirror-test") throws {
        var base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress else { return false }
            return mkdtemp(base) != nil
        }
        guard made else { throw HarnessError.posix("mkdtemp(\(base)/\(prefix).XXXXXX)") }
        let created = String(decoding: template.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        // Resolve symlinks (e.g. /tmp -> /private/tmp) so paths printed by `mirror` and paths built
        // here compare equal.
        if let resolved = realpath(created, nil) {
            path = String(cString: resolved)
            free(resolved)
        } else {
            path = created
        }
    }

    deinit {
        if ProcessInfo.processInfo.environment["MIRROR_KEEP_TEST_DIRS"] == "1" {
            FileHandle.standardError.write(Data("MIRROR_KEEP_TEST_DIRS=1: keeping \(path)\n".utf8))
            return
        }
        TemporaryDirectory.removeTree(path)
    }

    /// `path` joined with a relative path (no normalisation: `path("a/b")` is `"\(path)/a/b"`).
    public func path(_ relative: String) -> String {
        relative.isEmpty ? path : "\(path)/\(relative)"
    }

    /// Removes `path` recursively without following symbolic links, making folders writable and
    /// searchable first. Best effort: errors are ignored (this runs in `deinit`, where nothing can be
    /// thrown, and a leftover file in a temp folder must not fail a test).
    public static func removeTree(_ path: String) {
        removeTree(bytes: Array(path.utf8))
    }

    /// Works on raw bytes rather than `String` so that names which are not valid UTF-8 (tests may
    /// create them on purpose) are removed too instead of being "repaired" into a different name.
    private static func removeTree(bytes path: [UInt8]) {
        let cPath = path.map { CChar(bitPattern: $0) } + [0]
        var info = stat()
        guard lstat(cPath, &info) == 0 else { return }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            unlink(cPath)
            return
        }
        // lstat said folder, so chmod (which follows links) acts on the folder itself.
        chmod(cPath, 0o700)
        var names: [[UInt8]] = []
        if let dir = opendir(cPath) {
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix(while: { $0 != 0 })) }
                if name != [UInt8(ascii: ".")] && name != [UInt8(ascii: "."), UInt8(ascii: ".")] { names.append(name) }
            }
            closedir(dir)
        }
        for name in names { removeTree(bytes: path + [UInt8(ascii: "/")] + name) }
        rmdir(cPath)
    }
}
