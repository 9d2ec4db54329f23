import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// Fills an atomic DEST's building folder with hard links to the files the next set keeps
/// (docs/cli.md, "Atomic destinations") in one walk of the current set (``LinkFarm``), which also
/// finds the current set's files the manifest no longer lists, which the publish drops
/// (``AtomicBuild/publish(everyFileVerified:options:)``), so the publish does not walk the set again.
///
/// A listed file of the current set is linked when the journal vouches for it. An entry the
/// current set lacks, or holds unverified, is linked from a kept generation that holds it verified
/// (rolling forward after a rollback), else from the current set unless the journal knows another
/// version at its path (the run then checks it as any file found in place). Whatever is not
/// linked is fetched.
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
        /// Files of a kept generation the journal no longer vouched for (its record of the path is
        /// another version's), hashed, found to be the entry's and linked: each with its status,
        /// journaled by the caller as verified.
        var hashed: [(ManifestEntry, FileStatus)] = []
    }

    /// What one part of the walk (a top-level folder, or the files at the top) found.
    private struct Part: Sendable {
        var outcome = Outcome()
        /// Entries linked, or already in the building folder: 32 bits each (a manifest has fewer
        /// than 2^32 entries), 4 MB at 10^6 rather than 8, held until the walk ends.
        var done: [UInt32] = []
        /// Entries whose current file the journal does not vouch for: linked later, if at all.
        var deferred: [Int] = []
    }

    /// Walks the current set and links what the next set keeps (``LinkFarm``: a top-level folder
    /// per thread); then what is left is linked from kept generations, on this thread.
    func run() throws -> Outcome {
        let entries = manifest.entries
        let listed = PathIndex(listing: entries)
        var parts: [Part] = []
        if let current {
            let seed = self
            parts = try LinkFarm(set: current, building: building).walk({ Part() }) { file, linker, part in
                try seed.visit(file, listed: listed, linker: &linker, into: &part)
            }
        }
        var outcome = Outcome()
        var done = [Bool](repeating: false, count: entries.count)
        var unverified = Set<Int>()
        for part in parts {
            outcome.dropped += part.outcome.dropped
            outcome.currentFiles += part.outcome.currentFiles
            outcome.untrusted += part.outcome.untrusted
            outcome.linked += part.outcome.linked
            for index in part.done { done[Int(index)] = true }
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
            } else if unverified.contains(index), let current,
                      journal.records(for: entry.path)?.verified.map({ $0.identity == EntryIdentity(entry) }) ?? true {
                if try linkByPath(entry.path, from: current) { outcome.linked += 1 }
            } else if let set = hashedKeptCopy(of: entry) {
                // Only where the current set cannot serve: it lacks the entry, or the journal
                // knows its file as another version.
                if try linkByPath(entry.path, from: set), let linked = try building.status(of: entry.path) {
                    outcome.linked += 1
                    outcome.hashed.append((entry, linked))
                }
            }
        }
        return outcome
    }

    /// One file of the current set: linked when the next set keeps it, else counted as dropped.
    private func visit(_ file: SetWalk.File, listed: PathIndex, linker: inout LinkFarm.Linker, into part: inout Part) throws {
        part.outcome.currentFiles += 1
        guard let index = file.path.withUnsafeBufferPointer({ listed.entryIndex($0) }) else {
            if keepsExcluded(file.path) {
                _ = try linker.link(file)
            } else {
                part.outcome.dropped.append((file.path, file.status))
            }
            return
        }
        guard file.status.isRegularFile else { return }
        let entry = manifest.entries[index]
        guard journal.isVerified(entry, status: file.status) else {
            part.deferred.append(index)
            return
        }
        switch try linker.link(file) {
        case .linked:
            part.done.append(UInt32(truncatingIfNeeded: index))
            part.outcome.linked += 1
            if !ChangeTimeTrust.current.trustsMovedChangeTime(file.status) { part.outcome.untrusted.append((entry, file.status)) }
        case .present: part.done.append(UInt32(truncatingIfNeeded: index))
        case .refused: break
        }
    }

    /// Hard-links `path` of `set` to the same path in the building folder (`linkat(2)`). False
    /// when the file system will not link it there (`EMLINK`, `EXDEV`, `EPERM`); any other
    /// failure throws.
    func linkByPath(_ path: String, from set: Destination) throws -> Bool {
        let (from, name) = try set.openParent(of: path, create: false)
        defer { from.close() }
        let (to, _) = try building.openParent(of: path, create: true)
        defer { to.close() }
        guard DiskChange.linkat(from.fd, name, to.fd, name, 0) == 0 else {
            if errno == EMLINK || errno == EXDEV || errno == EPERM { return false }
            throw SystemError("link", building.display(path) + " into the next generation")
        }
        return true
    }

    /// The entry's file at its own path in a kept generation, newest first, read and hashed: the
    /// journal keeps one `verified` record a path, so after a publish changed a file, the older
    /// generation's copy of it is vouched for by nobody, though it holds the version a publish
    /// back to the older manifest (a rollback's roll forward, a republish undone) asks for. Only
    /// a file of this user's with the entry's mode and size is read (``FoundFilePolicy``); the
    /// store is this user's alone (docs/cli.md, "Atomic destinations"). Bytes a kept generation
    /// holds are linked, never fetched again, even with the origin unreachable.
    func hashedKeptCopy(of entry: ManifestEntry) -> Destination? {
        for set in kept {
            guard let status = try? set.status(of: entry.path), status.isRegularFile, status.size == entry.size,
                  FoundFilePolicy.current.keeps(status, for: entry), let file = try? set.openForReading(entry.path) else { continue }
            defer { file.close() }
            guard let opened = try? file.stat(), opened == status, let digests = try? FileHashing.digests(of: file, for: entry),
                  FileHashing.matches(entry, digests), (try? file.stat()) == status else { continue }
            return set
        }
        return nil
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
