import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// A private folder for a helper program's files (`mkdtemp` under `TMPDIR`, else /tmp): the list
/// and signature gpgv checks, and its home. Never DEST's, so outside the crash model
/// (DiskChangeArchitectureTests names it). Removed with what it holds, one folder level deep.
package final class Scratch {
    package let root: String
    /// The folder, open, so that its files are made and removed relative to it.
    private let folder: FileDescriptor

    package init() throws {
        let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((base + "/mirror-XXXXXX").utf8CString)
        guard mkdtemp(&template) != nil else { throw SystemError("mkdtemp", base + "/mirror-XXXXXX") }
        root = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError("open", root) }
        folder = FileDescriptor(fd: fd, displayPath: root)
    }

    package func path(_ name: String) -> String { root + "/" + name }

    /// A new file `name` holding `bytes`, readable by this user only.
    package func write(_ name: String, _ bytes: [UInt8]) throws {
        let fd = openat(folder.fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SystemError("create", path(name)) }
        let file = FileDescriptor(fd: fd, displayPath: path(name))
        defer { file.close() }
        try file.append(bytes)
    }

    /// A folder in it, private to this user (mode 0700), for a helper's own home.
    package func makeFolder(_ name: String) throws -> String {
        guard mkdirat(folder.fd, name, 0o700) == 0 || errno == EEXIST else { throw SystemError("mkdir", path(name)) }
        return path(name)
    }

    /// Removes every file and folder one level down, then the folder. Best effort.
    package func remove() {
        for name in (try? folder.entryNames()) ?? [] {
            let text = String(decoding: name, as: UTF8.self)
            guard unlinkat(folder.fd, text, 0) != 0, errno == EISDIR else { continue }
            let fd = openat(folder.fd, text, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { continue }
            let inner = FileDescriptor(fd: fd, displayPath: path(text))
            for file in (try? inner.entryNames()) ?? [] { unlinkat(fd, String(decoding: file, as: UTF8.self), 0) }
            inner.close()
            unlinkat(folder.fd, text, AT_REMOVEDIR)
        }
        rmdir(root)
    }
}
