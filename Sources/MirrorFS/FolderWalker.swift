import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// A folder's tree, depth first, without recursion and with a bounded number of open descriptors,
/// for walks and removals of DEST and of generations (docs/cli.md, "Deleting").
///
/// Why not recursion with a descriptor per level: a chain of folders 25,000 deep overflows the
/// stack, and needs 25,000 descriptors at once, more than `ulimit -n` allows. Here the folders
/// being walked are a stack of frames on the heap, and at most ``maxOpen`` of them hold a
/// descriptor: the deepest ones, and the walk's root. A frame whose descriptor was closed on the
/// way down is opened again on the way up with `openat(child, "..", O_NOFOLLOW | O_DIRECTORY)`,
/// and its `(st_dev, st_ino)` must be the one `fstat` recorded when the walk entered it: a folder
/// moved meanwhile stops the walk with `ESTALE` rather than take it somewhere else. Each folder is
/// thus opened at most twice and each name looked at once: the cost is linear in the entries.
///
/// Every folder is opened with `openat(O_NOFOLLOW | O_DIRECTORY)` relative to its parent, so a
/// symlink is reported as an entry, never followed. Names are bytes, as `readdir` gives them.
package final class FolderWalker {
    package enum Event {
        /// Anything that is not a folder (file, symlink, socket...), in ``folder``, with its status.
        case entry(name: [UInt8], status: FileStatus)
        /// The walk went into the folder `name`; ``folder`` and ``path`` are now that folder.
        case enter(name: [UInt8])
        /// The walk is done with the folder `name` and back in its parent (``folder``), so that
        /// the caller may remove it there (`unlinkat(AT_REMOVEDIR)`).
        case leave(name: [UInt8])
    }

    /// Descriptors held at most, the root's included: whatever `ulimit -n` is, a walk needs a few.
    static let defaultMaxOpen = 16

    private struct Frame {
        var name: [UInt8]
        var device: UInt64
        var inode: UInt64
        /// -1 while closed to stay under ``maxOpen``.
        var fd: Int32
        var names: [[UInt8]]
        var next = 0
        /// The length of ``path`` before this frame's name was added.
        var pathStart: Int
    }

    private var frames: [Frame] = []
    /// Frames `1 ..< firstOpen` have no descriptor; the root and `firstOpen...` have one.
    private var firstOpen = 1
    private let maxOpen: Int
    private let skipping: [UInt8]?
    /// Whether a folder this user may not open (`EACCES`) is left out instead of ending the walk.
    private let skippingUnreadable: Bool
    private let displayRoot: String
    /// The current folder, relative to the walk's root (empty at the root), bytes joined by `/`.
    package private(set) var path: [UInt8] = []
    /// Folders opened (`openat`, `..` included), for tests that check the cost is linear.
    private(set) var opens = 0
    /// The most descriptors the walk held at once.
    private(set) var peakOpen = 1

    /// Walks what `root` holds (the walk uses a duplicate; `root` stays the caller's), leaving out
    /// the name `skipping` at the top. `displayRoot` names `root` in messages. With
    /// `skippingUnreadable` (a `--seed` folder: a tree of someone else's, read only for what it
    /// offers), a folder below the root that `openat` refuses with `EACCES` is left out, as if empty.
    package init(_ root: FileDescriptor, skippingTopLevel skipping: [UInt8]? = nil, skippingUnreadable: Bool = false,
         maxOpen: Int = FolderWalker.defaultMaxOpen) throws {
        self.maxOpen = max(2, maxOpen)
        self.skipping = skipping
        self.skippingUnreadable = skippingUnreadable
        displayRoot = root.displayPath
        let fd = dup(root.fd)
        if fd < 0 { throw SystemError("read folder", root.displayPath) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let code = errno
            close(fd)
            throw SystemError("inspect", root.displayPath, code: code)
        }
        let names: [[UInt8]]
        do { names = try FileDescriptor.entryNames(ofFolder: fd, displayPath: root.displayPath) } catch {
            close(fd)
            throw error
        }
        frames = [Frame(name: [], device: UInt64(st.st_dev), inode: UInt64(st.st_ino), fd: fd, names: names, pathStart: 0)]
    }

    /// The descriptor of the current folder (-1 once the walk is over).
    package var folder: Int32 { frames.last?.fd ?? -1 }

    /// How many folders deep the current folder is (0: the root).
    var depth: Int { max(0, frames.count - 1) }

    /// `path` joined with `name`: the relative path of an entry of the current folder.
    package func path(of name: [UInt8]) -> [UInt8] {
        path.isEmpty ? name : path + [UInt8(ascii: "/")] + name
    }

    /// The human-readable path of `relative` (a path under the walk's root), for messages.
    func display(_ relative: [UInt8]) -> String {
        relative.isEmpty ? displayRoot : displayRoot + "/" + String(decoding: relative, as: UTF8.self)
    }

    /// The next event, nil when the whole tree was walked (all descriptors are then closed).
    package func next() throws -> Event? {
        while let top = frames.indices.last {
            guard frames[top].next < frames[top].names.count else {
                if top == 0 {
                    finish()
                    return nil
                }
                return .leave(name: try ascend())
            }
            let name = frames[top].names[frames[top].next]
            frames[top].next += 1
            if top == 0, let skipping, name == skipping { continue }
            let fd = frames[top].fd
            var st = stat()
            if name.withCString({ fstatat(fd, $0, &st, AT_SYMLINK_NOFOLLOW) }) != 0 {
                if errno == ENOENT { continue }
                throw SystemError("inspect", display(path(of: name)))
            }
            guard FileStatus(st).isDirectory else { return .entry(name: name, status: FileStatus(st)) }
            switch try descend(into: name) {
            case .entered: return .enter(name: name)
            case .vanished: continue
            case .replaced(let status): return .entry(name: name, status: status)
            }
        }
        return nil
    }

    private enum Descent { case entered, vanished, replaced(FileStatus) }

    /// Opens the folder `name` of the current one and makes it the current folder, closing the
    /// shallowest open descriptor (but the root's) beyond ``maxOpen``.
    private func descend(into name: [UInt8]) throws -> Descent {
        let parent = frames[frames.count - 1].fd
        let relative = path(of: name)
        opens += 1
        let fd = name.withCString { openat(parent, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        if fd < 0 {
            let code = errno
            if code == ENOENT || (code == EACCES && skippingUnreadable) { return .vanished }
            // Replaced by a symlink or a file since the fstatat: reported as what it is now.
            var st = stat()
            if code == ENOTDIR || code == ELOOP, name.withCString({ fstatat(parent, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0,
               !FileStatus(st).isDirectory {
                return .replaced(FileStatus(st))
            }
            throw SystemError("open folder", display(relative), code: code)
        }
        var st = stat()
        let names: [[UInt8]]
        do {
            guard fstat(fd, &st) == 0 else { throw SystemError("inspect", display(relative)) }
            names = try FileDescriptor.entryNames(ofFolder: fd, displayPath: display(relative))
        } catch {
            close(fd)
            throw error
        }
        let start = path.count
        if !path.isEmpty { path.append(UInt8(ascii: "/")) }
        path.append(contentsOf: name)
        frames.append(Frame(name: name, device: UInt64(st.st_dev), inode: UInt64(st.st_ino), fd: fd, names: names, pathStart: start))
        if frames.count - firstOpen + 1 > maxOpen {
            close(frames[firstOpen].fd)
            frames[firstOpen].fd = -1
            firstOpen += 1
        }
        peakOpen = max(peakOpen, frames.count - firstOpen + 1)
        return .entered
    }

    /// Leaves the current folder for its parent, opening the parent again through `..` (checked
    /// against the identity recorded on the way down) when its descriptor was closed.
    private func ascend() throws -> [UInt8] {
        let done = frames.removeLast()
        defer { close(done.fd) }
        path.removeSubrange(done.pathStart...)
        let parent = frames.count - 1
        if frames[parent].fd < 0 {
            opens += 1
            let fd = openat(done.fd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if fd < 0 { throw SystemError("open folder", display(path)) }
            var st = stat()
            guard fstat(fd, &st) == 0, UInt64(st.st_dev) == frames[parent].device, UInt64(st.st_ino) == frames[parent].inode else {
                close(fd)
                throw SystemError("return to", display(path), code: ESTALE, detail: "it moved while mirror walked it")
            }
            frames[parent].fd = fd
            firstOpen = parent
        }
        return done.name
    }

    deinit { finish() }

    private func finish() {
        for frame in frames where frame.fd >= 0 { close(frame.fd) }
        frames = []
    }
}

extension FolderWalker {
    /// `rm -r` of `name` in `folder`, no link followed (a symlink is removed, not entered), in one
    /// walk: each entry is removed with `unlinkat` as it is met, each folder with
    /// `unlinkat(AT_REMOVEDIR)` once the walk has left it. Names are bytes, as `readdir` gives
    /// them: a name that is not UTF-8 is removed too. Nothing there is no error.
    ///
    /// With `threads` above 1, the folders directly in `name` are removed each on a thread of its
    /// own (``WorkerPool``) before the rest: an unlink costs the kernel's time in the folder it
    /// names, and folders apart do not wait for each other (a pruned generation of 10^6 links).
    package static func removeTree(_ name: [UInt8], in folder: FileDescriptor, maxOpen: Int = defaultMaxOpen, threads: Int = 1) throws {
        let display = folder.displayPath + "/" + String(decoding: name, as: UTF8.self)
        let fd = name.withCString { openat(folder.fd, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        if fd < 0 {
            if errno == ENOENT { return }
            if errno == ENOTDIR || errno == ELOOP {
                if name.withCString({ DiskChange.unlinkat(folder.fd, $0, 0) }) != 0 && errno != ENOENT { throw SystemError("remove", display) }
                return
            }
            throw SystemError("open folder", display)
        }
        let top = FileDescriptor(fd: fd, displayPath: display)
        if threads > 1 { try removeFoldersIn(top, threads: threads) }
        let walker = try FolderWalker(top, maxOpen: maxOpen)
        top.close()
        while let event = try walker.next() {
            let (entry, flags): ([UInt8], Int32)
            switch event {
            case .enter: continue
            case .entry(let name, _): (entry, flags) = (name, 0)
            case .leave(let name): (entry, flags) = (name, AT_REMOVEDIR)
            }
            if entry.withCString({ DiskChange.unlinkat(walker.folder, $0, flags) }) != 0 && errno != ENOENT {
                throw SystemError("remove", walker.display(walker.path(of: entry)))
            }
        }
        if name.withCString({ DiskChange.unlinkat(folder.fd, $0, AT_REMOVEDIR) }) != 0 && errno != ENOENT {
            throw SystemError("remove", display)
        }
    }

    /// Removes each folder directly in `top`, several at once (``removeTree(_:in:maxOpen:threads:)``).
    private static func removeFoldersIn(_ top: FileDescriptor, threads: Int) throws {
        let folders = try top.entryNames().filter { name in
            var st = stat()
            return name.withCString { fstatat(top.fd, $0, &st, AT_SYMLINK_NOFOLLOW) } == 0 && FileStatus(st).isDirectory
        }
        let failure = Locked<SystemError?>(nil)
        WorkerPool.run(count: folders.count, threads: threads) { index in
            do {
                try removeTree(folders[index], in: top)
            } catch {
                let error = error as? SystemError ?? SystemError("remove", top.displayPath, code: EIO)
                failure.withLock { if $0 == nil { $0 = error } }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
    }
}
