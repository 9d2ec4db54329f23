import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// Fills an atomic DEST's building folder with hard links to the files the next set keeps
/// (docs/cli.md, "Atomic destinations"), at the cost a link farm must pay and no more: one walk of
/// the current set, as `cp -al` makes it, with one `fstatat` and one `linkat(2)` per file, each
/// relative to an open folder (``FolderWalker``), and the building folder's matching folder opened
/// once per folder, not once per file. The same walk finds the current set's files the manifest no
/// longer lists, which the publish drops (``AtomicBuild/publish(everyFileVerified:options:)``), so
/// the publish does not walk the set again.
///
/// A listed file of the current set is linked when the journal vouches for it, or when the
/// journal knows no other version at its path (the run then checks it as any file found in
/// place). An entry the current set lacks, or holds unverified, is linked from a kept generation
/// that holds it verified (rolling forward after a rollback) before an unverified current copy.
/// Whatever is not linked is fetched.
struct GenerationSeed: Sendable {
    let building: Destination
    let current: Destination?
    /// The complete generations DEST does not show, newest first.
    let kept: [Destination]
    let manifest: Manifest
    let journal: Journal
    /// Whether a file at this path, which the manifest as filtered does not list, stays in the
    /// next set (``AtomicBuild/keepsExcluded(_:)``).
    let keepsExcluded: @Sendable ([UInt8]) -> Bool

    /// What the walk found and did.
    struct Outcome: Sendable {
        /// The current set's files the next one drops: not listed, not kept by the filter.
        var dropped: [(path: [UInt8], status: FileStatus)] = []
        /// The files the current set holds (the deletion guardrails' `known`).
        var currentFiles = 0
        /// Files linked that the journal vouched for but would no longer after the link moved
        /// their change time (``ChangeTimeTrust``): journaled again by the caller.
        var untrusted: [(ManifestEntry, FileStatus)] = []
        /// Files linked.
        var linked = 0
    }

    private enum LinkResult { case linked, present, refused }

    /// What one part of the walk (a top-level folder, or the files at the top) found.
    private struct Part: Sendable {
        var outcome = Outcome()
        /// Entries linked, or already in the building folder.
        var done: [Int] = []
        /// Entries whose current file the journal does not vouch for: linked later, if at all.
        var deferred: [Int] = []
    }

    /// Walks the current set and links what the next set keeps, each top-level folder on a
    /// thread of its own (``WorkerPool``, as many as cores): a link is a few microseconds of the
    /// kernel's time in the folder it names, and folders apart do not wait for each other. Then
    /// what is left is linked from kept generations, on this thread.
    func run() throws -> Outcome {
        let entries = manifest.entries
        let listed = PathIndex(listing: entries)
        var parts: [Part] = []
        if let current {
            var top = Part()
            var topFolders: [[UInt8]] = []
            for name in try current.root.entryNames() where name != Array(Destination.stateFolderName.utf8) {
                var st = stat()
                guard name.withCString({ fstatat(current.root.fd, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0 else {
                    if errno == ENOENT { continue }
                    throw SystemError("inspect", current.display(String(decoding: name, as: UTF8.self)))
                }
                let status = FileStatus(st)
                if status.isDirectory {
                    topFolders.append(name)
                } else {
                    var target = TargetFolder(building: building)
                    defer { target.close() }
                    try visit(name, status: status, in: current.root.fd, folder: [], path: name, listed: listed, target: &target, into: &top)
                }
            }
            parts.append(top)
            let found = Locked([Part]())
            let failure = Locked<SystemError?>(nil)
            let seed = self, folders = topFolders
            WorkerPool.run(count: folders.count, threads: WorkerPool.coreCount) { index in
                do {
                    let part = try seed.walk(folders[index], of: current, listed: listed)
                    found.withLock { $0.append(part) }
                } catch let error as SystemError {
                    failure.withLock { if $0 == nil { $0 = error } }
                } catch {
                    failure.withLock { if $0 == nil { $0 = SystemError("link", seed.building.display(String(decoding: folders[index], as: UTF8.self)), code: EIO) } }
                }
            }
            if let error = failure.withLock({ $0 }) { throw error }
            parts += found.withLock { $0 }
        }
        var outcome = Outcome()
        var done = [Bool](repeating: false, count: entries.count)
        var unverified = Set<Int>()
        for part in parts {
            outcome.dropped += part.outcome.dropped
            outcome.currentFiles += part.outcome.currentFiles
            outcome.untrusted += part.outcome.untrusted
            outcome.linked += part.outcome.linked
            for index in part.done { done[index] = true }
            unverified.formUnion(part.deferred)
        }
        // What the current set lacks or holds unverified: a kept generation's verified copy, else
        // the current set's copy unless the journal knows it as another version.
        guard current != nil || !kept.isEmpty else { return outcome }
        for index in entries.indices where !done[index] {
            let entry = entries[index]
            guard try building.status(of: entry.path) == nil else { continue }
            if let (set, old) = keptCopy(of: entry) {
                if try linkByPath(entry.path, from: set) {
                    outcome.linked += 1
                    if !ChangeTimeTrust.current.trustsMovedChangeTime(old) { outcome.untrusted.append((entry, old)) }
                }
            } else if unverified.contains(index), let current {
                if let record = journal.records(for: entry.path)?.verified, record.identity != EntryIdentity(entry) { continue }
                if try linkByPath(entry.path, from: current) { outcome.linked += 1 }
            }
        }
        return outcome
    }

    /// One top-level folder of the current set, walked and linked (``run()``).
    private func walk(_ name: [UInt8], of current: Destination, listed: PathIndex) throws -> Part {
        var part = Part()
        let fd = name.withCString { openat(current.root.fd, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else {
            if errno == ENOENT { return part }
            throw SystemError("open folder", current.display(String(decoding: name, as: UTF8.self)))
        }
        let folder = FileDescriptor(fd: fd, displayPath: current.display(String(decoding: name, as: UTF8.self)))
        let walker = try FolderWalker(folder)
        folder.close()
        var target = TargetFolder(building: building)
        defer { target.close() }
        while let event = try walker.next() {
            guard case .entry(let file, let status) = event else { continue }
            let inner = walker.path
            let parent = inner.isEmpty ? name : name + [UInt8(ascii: "/")] + inner
            try visit(file, status: status, in: walker.folder, folder: parent, path: parent + [UInt8(ascii: "/")] + file,
                      listed: listed, target: &target, into: &part)
        }
        return part
    }

    /// One file of the current set: linked when the next set keeps it, else counted as dropped.
    private func visit(_ name: [UInt8], status: FileStatus, in folder: Int32, folder parent: [UInt8], path: [UInt8],
                       listed: PathIndex, target: inout TargetFolder, into part: inout Part) throws {
        part.outcome.currentFiles += 1
        guard let index = path.withUnsafeBufferPointer({ listed.entryIndex($0) }) else {
            if keepsExcluded(path) {
                _ = try link(name, from: folder, to: &target, folder: parent, path: path)
            } else {
                part.outcome.dropped.append((path, status))
            }
            return
        }
        guard status.isRegularFile else { return }
        let entry = manifest.entries[index]
        guard journal.isVerified(entry, status: status) else {
            part.deferred.append(index)
            return
        }
        switch try link(name, from: folder, to: &target, folder: parent, path: path) {
        case .linked:
            part.done.append(index)
            part.outcome.linked += 1
            if !ChangeTimeTrust.current.trustsMovedChangeTime(status) { part.outcome.untrusted.append((entry, status)) }
        case .present: part.done.append(index)
        case .refused: break
        }
    }

    /// The building folder's folder for the walk's current folder, opened (and made) once per
    /// folder the walk links into: folders of the current set with nothing to link are not made.
    private struct TargetFolder {
        let building: Destination
        var path: [UInt8]?
        var fd: FileDescriptor?

        init(building: Destination) { self.building = building }

        mutating func open(_ folder: [UInt8], for file: [UInt8]) throws -> Int32 {
            if let fd, path == folder { return fd.fd }
            close()
            guard let relative = String(validating: file, as: UTF8.self) else { throw SystemError("link", String(decoding: file, as: UTF8.self), code: EILSEQ) }
            // Published only after `syncfs` (``AtomicBuild/publish(everyFileVerified:options:)``).
            let (opened, _) = try building.openParent(of: relative, create: true, syncingNewFolders: false)
            fd = opened
            path = folder
            return opened.fd
        }

        mutating func close() {
            fd?.close()
            fd = nil
            path = nil
        }
    }

    /// Links `name` of the walk's folder `from` to the same path in the building folder.
    private func link(_ name: [UInt8], from: Int32, to target: inout TargetFolder, folder: [UInt8], path: [UInt8]) throws -> LinkResult {
        guard String(validating: path, as: UTF8.self) != nil else { return .refused }
        let to = try target.open(folder, for: path)
        guard name.withCString({ linkat(from, $0, to, $0, 0) }) == 0 else {
            if errno == EEXIST { return .present }
            if errno == EMLINK || errno == EXDEV || errno == EPERM { return .refused }
            throw SystemError("link", building.display(String(decoding: path, as: UTF8.self)) + " into the next generation")
        }
        return .linked
    }

    /// Hard-links `path` of `set` to the same path in the building folder (`linkat(2)`). False
    /// when the file system will not link it there (`EMLINK`, `EXDEV`, `EPERM`); any other
    /// failure throws.
    func linkByPath(_ path: String, from set: Destination) throws -> Bool {
        let (from, name) = try set.openParent(of: path, create: false)
        defer { from.close() }
        let (to, _) = try building.openParent(of: path, create: true)
        defer { to.close() }
        guard linkat(from.fd, name, to.fd, name, 0) == 0 else {
            if errno == EMLINK || errno == EXDEV || errno == EPERM { return false }
            throw SystemError("link", building.display(path) + " into the next generation")
        }
        return true
    }

    /// The entry's file in a kept generation, newest first, that the journal verified as this
    /// version (``Journal/isVerified(_:status:)``).
    func keptCopy(of entry: ManifestEntry) -> (Destination, FileStatus)? {
        for set in kept {
            guard let status = try? set.status(of: entry.path), status.isRegularFile,
                  journal.isVerified(entry, status: status) else { continue }
            return (set, status)
        }
        return nil
    }
}
