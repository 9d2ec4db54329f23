import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// `--atomic` (docs/cli.md, "Atomic destinations"): the run builds the next generation in
/// `DEST.generations/building` and publishes it whole (``GenerationStore``). Unchanged files are
/// hard-linked from the current set before planning, so the plan, the transfers, the checks
/// and the installs are those of any run, aimed at the building folder; only a run in which
/// every listed file verified switches DEST to it.
extension SyncRunner {
    /// The current set, when it already is exactly the manifest's: every entry verified in the
    /// current generation and nothing else in it. Then nothing is built (an hourly no-op run
    /// must not make a generation of links each time).
    func currentGenerationIsComplete(_ store: GenerationStore) throws -> Bool {
        guard case .generation = store.current(), let current = try Destination.openExisting(store.identity) else { return false }
        let reconciler = Reconciler(planner: Planner(destination: current, journal: journal, partialFolder: partialFolder), journal: journal)
        for entry in manifest.entries {
            guard case .upToDate = reconciler.action(for: entry) else { return false }
        }
        return try current.walk(skippingTopLevel: Destination.stateFolderName).files.count == manifest.entries.count
    }

    /// Readies the building folder for this manifest: removes what an earlier, stopped run put
    /// there that this manifest does not list, then hard-links each listed file that the building
    /// folder lacks from the current set (`linkat(2)`), unless the journal knows that file as
    /// another version of the entry (it is fetched). A link changes the file's change time, so a
    /// file the journal had verified is journaled again with its new status, after checking that it
    /// is the same inode, size and modification time: it is not hashed again.
    func seedBuilding(from current: Destination?) throws {
        let listed = PathIndex(listing: manifest.entries)
        let leftover = try destination.walk(skippingTopLevel: "")
        do {
            let remover = try destination.remover()
            for file in leftover.files where !listed.containsFile(file.path) {
                _ = try remover.removeFile(file.path, expected: file.status)
            }
        }
        // Every folder left empty; those the manifest's files need are made again when linked.
        _ = try? destination.removeEmptyFolders(skippingTopLevel: "", keeping: { _ in false })
        guard current != nil || !keptGenerations.isEmpty else { return }
        var linked: [(ManifestEntry, FileStatus)] = []
        for entry in manifest.entries {
            guard try destination.status(of: entry.path) == nil else { continue }
            // The current set's file, else this version verified in a kept generation (rolling
            // forward after a rollback), else the current set's file unless known as another version.
            let here = (try? current?.status(of: entry.path)).flatMap { $0 }.flatMap { $0.isRegularFile ? $0 : nil }
            var source: (Destination, FileStatus, Bool)?
            if let current, let old = here, journal.isVerified(entry, status: old) {
                source = (current, old, true)
            } else if let (set, old) = keptCopy(of: entry) {
                source = (set, old, true)
            } else if let current, let old = here {
                source = (current, old, false)
            }
            guard let (set, old, verified) = source else { continue }
            if !verified, let record = journal.records(for: entry.path)?.verified, record.identity != EntryIdentity(entry) { continue }
            let (from, name) = try set.openParent(of: entry.path, create: false)
            defer { from.close() }
            let (to, _) = try destination.openParent(of: entry.path, create: true)
            defer { to.close() }
            guard linkat(from.fd, name, to.fd, name, 0) == 0 else {
                if errno == EMLINK || errno == EXDEV || errno == EPERM { continue }  // fetched instead
                throw SystemError("link", destination.display(entry.path) + " into the next generation")
            }
            if verified { linked.append((entry, old)) }
        }
        CrashPoint.hit("seed-after-links")
        try refreshRecords(linked, in: destination)
    }

    /// After a run in which every listed file verified: the files of the current set that the new
    /// one drops pass the deletion guardrails (``DeletionPolicy``), then the building folder is
    /// made durable, named as the next generation and DEST switched to it; old generations beyond
    /// `--keep` go. Otherwise DEST keeps the previous complete set and the next run goes on
    /// building.
    func publishGeneration(_ store: GenerationStore) {
        guard everyFileVerified else {
            report.notice("\(store.destPath) still holds the previous complete set; the next run goes on building the new one")
            return
        }
        do {
            let listed = PathIndex(listing: manifest.entries)
            let current = try Destination.openExisting(store.identity)
            let before = try current?.walk(skippingTopLevel: Destination.stateFolderName).files ?? []
            let dropped = before.filter { !listed.containsFile($0.path) }
            let policy = options.deletionPolicy
            let decision = policy.decide(.init(candidates: dropped.count, known: before.count,
                                               listed: manifest.entries.count, everyFileVerified: true))
            if let refusal = policy.refusal(decision) {
                summary.deletionRefused = refusal + "; \(store.destPath) still holds the previous set"
                report.fatal(summary.deletionRefused ?? refusal)
                return
            }
            try destination.syncAll()
            let vouched = verifiedStatuses(in: destination)
            let n = try store.sealBuilding()
            try store.switchTo(n)
            recordBuiltFrom(store, generation: n)
            for file in dropped {
                let result = EntryResult(path: String(decoding: file.path, as: UTF8.self), outcome: .deleted, size: file.status.size, source: nil)
                summary.deleted += 1
                summary.add(result)
                report.entryFinished(result)
                if let path = String(validating: file.path, as: UTF8.self) { try writer.append(.removed(path: path), durable: false) }
            }
            _ = try store.prune(keep: options.keepGenerations)
            CrashPoint.hit("publish-after-prune")
            if let published = try Destination.openExisting(store.identity) { try refreshRecords(vouched, in: published) }
        } catch let error as SystemError {
            ending.keepFirstFatal(error)
        } catch {
            summary.deletionRefused = "\(store.destPath) still holds the previous set: \(error)"
        }
    }

    /// The status of each listed file the journal vouches for in `set`, by path.
    func verifiedStatuses(in set: Destination) -> [(ManifestEntry, FileStatus)] {
        manifest.entries.compactMap { entry in
            guard let status = try? set.status(of: entry.path), journal.isVerified(entry, status: status) else { return nil }
            return (entry, status)
        }
    }

    /// Removing a tree of links (a plain DEST's old folder, a pruned generation) changes the link
    /// count, and so the change time, of every file the published set shares with it: each file
    /// vouched for before is journaled again with its new status, if it still is the same inode,
    /// size and modification time. Otherwise its record no longer matches and the next run would
    /// hash every unchanged file (docs/journal.md, "Atomic destinations").
    func refreshRecords(_ vouched: [(ManifestEntry, FileStatus)], in set: Destination) throws {
        for (entry, before) in vouched {
            guard let now = try? set.status(of: entry.path), now != before, now.sameFile(as: before),
                  now.size == before.size, now.mtime == before.mtime else { continue }
            let adopted = journal.records(for: entry.path)?.verified?.adopted ?? false
            try writer.append(.verified(VerifiedRecord(identity: EntryIdentity(entry), status: now, adopted: adopted)), durable: false)
        }
    }
}
