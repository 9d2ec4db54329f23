#if canImport(Glibc)
import Glibc
#endif

/// Walking DEST and removing from it, for deletions (docs/cli.md, "Deleting"). Paths are bytes,
/// as `readdir` gives them; every folder is opened with `openat(O_NOFOLLOW | O_DIRECTORY)` from
/// its parent, so a symlink planted in DEST is removed as a link and never followed, and nothing
/// outside DEST is ever read or removed. Walks and removals hold a bounded number of descriptors
/// and cost linear time however deep the tree is (``FolderWalker``, ``FolderCursor``).
extension Destination {
    public struct Tree: Sendable {
        /// Everything that is not a folder (files, symlinks, sockets...), with its status.
        public var files: [(path: [UInt8], status: FileStatus)] = []
        /// Every folder, each after the folder it is in. A folder is its name and the index of its
        /// parent here (nil: at the top), not its whole path: the paths of a chain of folders n
        /// deep would take n²/2 names' bytes. ``path(ofFolder:)`` spells one out.
        public var folders: [(name: [UInt8], parent: Int?)] = []

        /// The relative path of `folders[index]`.
        public func path(ofFolder index: Int) -> [UInt8] {
            var names: [[UInt8]] = []
            var at: Int? = index
            while let i = at {
                names.append(folders[i].name)
                at = folders[i].parent
            }
            return Array(names.reversed().joined(separator: [UInt8(ascii: "/")]))
        }
    }

    /// Every name under DEST but `skipping` at its top (the state folder), depth first.
    package func walk(skippingTopLevel skipping: String) throws -> Tree {
        var tree = Tree()
        let walker = try FolderWalker(root, skippingTopLevel: Array(skipping.utf8))
        var parents: [Int] = []
        while let event = try walker.next() {
            switch event {
            case .entry(let name, let status):
                tree.files.append((walker.path(of: name), status))
            case .enter(let name):
                tree.folders.append((name, parents.last))
                parents.append(tree.folders.count - 1)
            case .leave:
                parents.removeLast()
            }
        }
        return tree
    }

    public enum Removal: Sendable, Equatable {
        case removed
        /// Nothing is at the path any more.
        case gone
        /// Something other than the file planned is there now (changed, replaced): left alone.
        case changed
    }

    /// Removals by path for one batch (a run's deletions): the folders opened for one path are kept
    /// for the next (``FolderCursor``), so files listed depth first cost linear time.
    public final class Remover {
        let destination: Destination
        let cursor: FolderCursor

        init(_ destination: Destination) throws {
            self.destination = destination
            cursor = try FolderCursor(destination.root)
        }

        /// Removes the file at `relative` if it is still `expected` (same inode, device, size, mtime
        /// and ctime, by `fstatat` just before `unlinkat`): a file written or replaced since the plan
        /// stays. The folder's entry is made durable by the caller (``syncFolder(of:)``) or a `syncfs`.
        public func removeFile(_ relative: [UInt8], expected: FileStatus) throws -> Removal {
            guard let (folder, name) = try cursor.parent(of: relative) else { return .gone }
            var st = stat()
            if name.withCString({ fstatat(folder, $0, &st, AT_SYMLINK_NOFOLLOW) }) != 0 {
                if errno == ENOENT { return .gone }
                throw SystemError("inspect", destination.display(String(decoding: relative, as: UTF8.self)))
            }
            let now = FileStatus(st)
            guard !now.isDirectory, now.inode == expected.inode, now.device == expected.device, now.size == expected.size,
                  now.mtime == expected.mtime, now.ctime == expected.ctime else { return .changed }
            if name.withCString({ DiskChange.unlinkat(folder, $0, 0) }) != 0 {
                if errno == ENOENT { return .gone }
                throw SystemError("delete", destination.display(String(decoding: relative, as: UTF8.self)))
            }
            return .removed
        }

        /// Removes the folder at `relative` if it is empty (`unlinkat(AT_REMOVEDIR)`, which refuses a
        /// folder with anything in it). True when removed.
        public func removeFolderIfEmpty(_ relative: [UInt8]) -> Bool {
            guard let (folder, name) = try? cursor.parent(of: relative) else { return false }
            return name.withCString { DiskChange.unlinkat(folder, $0, AT_REMOVEDIR) } == 0
        }
    }

    /// A ``Remover`` for a batch of removals.
    public func remover() throws -> Remover { try Remover(self) }

    /// ``Remover/removeFile(_:expected:)`` alone: every folder on the way opened from DEST.
    public func removeFile(_ relative: [UInt8], expected: FileStatus) throws -> Removal {
        try remover().removeFile(relative, expected: expected)
    }

    /// ``Remover/removeFolderIfEmpty(_:)`` alone.
    public func removeFolderIfEmpty(_ relative: [UInt8]) -> Bool {
        (try? remover())?.removeFolderIfEmpty(relative) ?? false
    }

    /// Removes every empty folder under DEST (one left empty by the removal of the folders in it
    /// too), but `skipping` at the top and the folders `keep` names, in one walk (``FolderWalker``,
    /// `unlinkat(AT_REMOVEDIR)` once a folder's entries were walked). `keep` is asked only about a
    /// folder whose parent it kept (or at the top): a folder in one it does not keep is not kept
    /// either, so that a chain thousands deep costs no path per folder. Returns how many went.
    /// `leavingWhole` names folders kept with everything in them (another destination's,
    /// `NestedDestinations`); it is asked about every folder not inside one, so pass nil when
    /// there are none.
    package func removeEmptyFolders(skippingTopLevel skipping: String, keeping keep: ([UInt8]) -> Bool,
                            leavingWhole: (([UInt8]) -> Bool)? = nil) throws -> Int {
        let walker = try FolderWalker(root, skippingTopLevel: Array(skipping.utf8))
        // Whether each folder from the top to the current one is kept (the root is), and whether
        // it is left whole with what it holds.
        var kept = [true]
        var whole = [false]
        var removed = 0
        while let event = try walker.next() {
            switch event {
            case .entry: continue
            case .enter:
                let inWhole = whole[whole.count - 1] || leavingWhole?(walker.path) == true
                whole.append(inWhole)
                kept.append(inWhole || (kept[kept.count - 1] && keep(walker.path)))
            case .leave(let name):
                whole.removeLast()
                if kept.removeLast() { continue }
                if name.withCString({ DiskChange.unlinkat(walker.folder, $0, AT_REMOVEDIR) }) == 0 { removed += 1 }
            }
        }
        return removed
    }

    /// Makes every removal in DEST durable: one `syncfs(2)` for the whole file system.
    @discardableResult package func syncAll() throws -> Synced { try root.syncFilesystem() }
}

extension UnsafeBufferPointer where Element == UInt8 {
    /// The bytes as a NUL-terminated C string, on the stack when short (a path's bytes hold no NUL).
    package func withCString<R>(_ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        try withUnsafeTemporaryAllocation(of: CChar.self, capacity: count + 1) { buffer in
            for i in 0 ..< count { buffer[i] = CChar(bitPattern: self[i]) }
            buffer[count] = 0
            // Never nil: the allocation holds at least the terminating NUL.
            return try body(UnsafePointer(buffer.baseAddress!))
        }
    }
}

extension Array where Element == UInt8 {
    /// The bytes as a NUL-terminated C string (a name from `readdir` holds no NUL).
    package func withCString<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
        withUnsafeBufferPointer { $0.withCString(body) }
    }
}
