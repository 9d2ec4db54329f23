#if canImport(Glibc)
import Glibc
#endif

/// A folder under a root, opened by its relative path and kept open for the next path, for
/// removals of many files (docs/cli.md, "Deleting").
///
/// Why: opening every component from the root for each file costs the depth per file, which for
/// a chain of folders thousands deep, with files at many depths, is the square of the depth. The
/// cursor keeps the folders from the root to the last one it opened; the next path goes up to the
/// folders the two share and down from there. Paths that come depth first (a walk's, a plan made
/// from one) thus open each folder about once and compare each name once: linear in their bytes.
///
/// Each step down is `openat(O_NOFOLLOW | O_DIRECTORY)` relative to the folder above, so no link
/// is followed. At most ``maxOpen`` descriptors are held (the root's and the deepest ones); a
/// folder whose descriptor was closed is opened again with `openat(child, "..")` and must have the
/// `(st_dev, st_ino)` that `fstat` recorded on the way down. When it has not (the folder moved), or
/// `..` cannot be opened (the folder was removed), the cursor starts again from the root, as every
/// path once did. Keep a cursor for one batch only: a folder moved while it is held is still the
/// folder it opened.
final class FolderCursor {
    private struct Frame {
        var device: UInt64
        var inode: UInt64
        /// -1 while closed to stay under ``maxOpen``.
        var fd: Int32
        /// Where this folder's path ends in ``path``.
        var end: Int
    }

    /// `frames[0]` is the root (a duplicate of the caller's descriptor).
    private var frames: [Frame]
    /// The deepest folder's path, relative to the root, names joined by `/`: the next path's
    /// shared part is found by comparing bytes (`memcmp`), not name by name.
    private var path: [UInt8] = []
    /// Frames `1 ..< firstOpen` have no descriptor; the root and `firstOpen...` have one.
    private var firstOpen = 1
    private let maxOpen: Int
    private let displayRoot: String
    /// Folders opened (`openat`, `..` included), for tests that check the cost is linear.
    private(set) var opens = 0

    init(_ root: FileDescriptor, maxOpen: Int = FolderWalker.defaultMaxOpen) throws {
        self.maxOpen = max(2, maxOpen)
        displayRoot = root.displayPath
        let fd = dup(root.fd)
        if fd < 0 { throw SystemError("open", root.displayPath) }
        frames = [Frame(device: 0, inode: 0, fd: fd, end: 0)]
    }

    deinit {
        for frame in frames where frame.fd >= 0 { close(frame.fd) }
    }

    /// The descriptor of the folder holding `relative`, and the last component's name; nil when
    /// a folder on the way is gone (`ENOENT`) or the path is empty. The descriptor stays the
    /// cursor's: valid until its next call.
    func parent(of relative: [UInt8]) throws -> (folder: Int32, name: [UInt8])? {
        var end = relative.count
        while end > 0 && relative[end - 1] == UInt8(ascii: "/") { end -= 1 }
        guard end > 0 else { return nil }
        let slash = relative[..<end].lastIndex(of: UInt8(ascii: "/"))
        guard let folder = try open(relative[..<(slash ?? 0)]) else { return nil }
        return (folder, Array(relative[(slash.map { $0 + 1 } ?? 0)..<end]))
    }

    /// The folder `relative` (names joined by `/`) leads to; nil when one of them is gone.
    func open(_ relative: ArraySlice<UInt8>) throws -> Int32? {
        var shared = sharedFrames(with: relative)
        while frames.count - 1 > shared {
            if !ascend() {
                reset()
                shared = 0
                break
            }
        }
        // The names below the shared folder (past its path and the `/` after it).
        let rest = relative.dropFirst(frames[shared].end == 0 ? 0 : frames[shared].end + 1)
        for component in rest.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true) {
            let above = frames[frames.count - 1].fd
            let start = path.count
            if !path.isEmpty { path.append(UInt8(ascii: "/")) }
            path.append(contentsOf: component)
            opens += 1
            let fd = component.withCString { openat(above, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            var st = stat()
            if fd < 0 || fstat(fd, &st) != 0 {
                let code = errno
                let display = displayRoot + "/" + String(decoding: path, as: UTF8.self)
                path.removeSubrange(start...)
                if fd >= 0 { close(fd) }
                if code == ENOENT { return nil }
                throw SystemError(fd < 0 ? "open folder" : "inspect", display, code: code)
            }
            frames.append(Frame(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), fd: fd, end: path.count))
            if frames.count - firstOpen + 1 > maxOpen {
                close(frames[firstOpen].fd)
                frames[firstOpen].fd = -1
                firstOpen += 1
            }
        }
        return frames[frames.count - 1].fd
    }

    /// The deepest frame whose path `relative` starts with (whole names): the deepest is tried
    /// first (the same folder, or one below it, is the common case), then a binary search, since
    /// a frame's path is a prefix of `relative` only if every shallower frame's is too.
    private func sharedFrames(with relative: ArraySlice<UInt8>) -> Int {
        func isPrefix(_ k: Int) -> Bool {
            let end = frames[k].end
            guard end <= relative.count else { return false }
            if end < relative.count && relative[relative.startIndex + end] != UInt8(ascii: "/") { return false }
            return path.withUnsafeBufferPointer { mine in
                relative.withUnsafeBufferPointer { theirs in
                    guard let a = mine.baseAddress, let b = theirs.baseAddress else { return end == 0 }
                    return memcmp(a, b, end) == 0
                }
            }
        }
        if isPrefix(frames.count - 1) { return frames.count - 1 }
        var (low, high) = (0, frames.count - 1)  // isPrefix(low), !isPrefix(high)
        while high - low > 1 {
            let mid = (low + high) / 2
            if isPrefix(mid) { low = mid } else { high = mid }
        }
        return low
    }

    /// Closes the deepest folder; false when its parent, closed before, cannot be opened again
    /// through `..` as the very folder recorded.
    private func ascend() -> Bool {
        let done = frames.removeLast()
        defer { close(done.fd) }
        let parent = frames.count - 1
        path.removeSubrange(frames[parent].end...)
        guard frames[parent].fd < 0 else { return true }
        opens += 1
        let fd = openat(done.fd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return false }
        var st = stat()
        guard fstat(fd, &st) == 0, UInt64(st.st_dev) == frames[parent].device, UInt64(st.st_ino) == frames[parent].inode else {
            close(fd)
            return false
        }
        frames[parent].fd = fd
        firstOpen = parent
        return true
    }

    /// Back at the root, every other folder closed.
    private func reset() {
        for frame in frames.dropFirst() where frame.fd >= 0 { close(frame.fd) }
        frames.removeSubrange(1...)
        path = []
        firstOpen = 1
    }
}

extension ArraySlice where Element == UInt8 {
    /// The bytes as a NUL-terminated C string (a name from `readdir` holds no NUL).
    func withCString<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
        withUnsafeBufferPointer { $0.withCString(body) }
    }
}
