import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// `--atomic` (docs/cli.md, "Atomic destinations"): the run builds the next generation in
/// `DEST.generations/building` and publishes it whole (``GenerationStore``). Unchanged files are
/// hard-linked from the current set before planning (``seed()``), so the plan, the transfers, the
/// checks and the installs are those of any run, aimed at the building folder; only a run in which
/// every listed file verified switches DEST to it (``publish(everyFileVerified:options:)``).
///
/// Before anything is built, ``start(_:manifest:digest:report:)`` asks whether DEST is held at an
/// older generation (``HoldPolicy``; docs/cli.md, "mirror rollback") or already shows this
/// manifest's set. The loop (``SyncRunner``) holds this value for the run and reads what each step
/// did from what it returns: this type touches DEST, its store and the journal, never the run's
/// summary or ending.
struct AtomicBuild {
    let store: GenerationStore
    /// The building folder, where the run installs (``RunPlace/destination``).
    let building: Destination
    /// The set DEST shows now, if any.
    let current: Destination?
    /// The complete generations DEST does not show, newest first (``RunPlace/keptGenerations``).
    let kept: [Destination]
    /// The building folder's `.mirror/partial/`, for the planner's look at the current set.
    let partialFolder: FileDescriptor?
    let manifest: Manifest
    /// `--include`/`--exclude`: a file of the current set at a path the filter leaves out is
    /// not this machine's to drop, so it is linked into the next set too, unless
    /// `--delete-excluded` (docs/cli.md, "Choosing what a machine syncs").
    let filter: PathFilter?
    let deleteExcluded: Bool
    let writer: JournalWriter
    /// SHA-256 of the manifest's bytes, asked for only when a hold is checked or a generation
    /// recorded (``ManifestOrigin/digest``).
    let digest: () -> String?
    let report: ConsoleReport
    var journal: Journal { writer.journal }

    /// What an atomic run finds before it builds.
    enum Start {
        /// DEST is held at an older generation: nothing is built, downloaded or journaled.
        case held(RollbackHold)
        /// DEST already shows exactly this manifest's set: nothing is built.
        case complete
        /// The building folder is seeded; the run fills it.
        case building(AtomicBuild)
    }

    /// Sweeps what a killed run left, checks the hold and whether the current set is already
    /// complete, and otherwise seeds the building folder.
    static func start(_ place: RunPlace, manifest: Manifest, options: SyncOptions, digest: @escaping () -> String?,
                      report: ConsoleReport) throws -> Start? {
        guard let store = place.generations else { return nil }
        let build = AtomicBuild(store: store, building: place.destination, current: place.current,
                                kept: place.keptGenerations, partialFolder: place.partialFolder, manifest: manifest,
                                filter: options.filter, deleteExcluded: options.deleteExcluded, writer: place.writer,
                                digest: digest, report: report)
        try store.sweepLeftovers()
        if let hold = try build.hold() { return .held(hold) }
        if try build.currentIsComplete() {
            build.recordBuiltFromIfMissing()
            try GenerationStore.removeTree(GenerationStore.buildingName, in: store.store)
            return .complete
        }
        try build.seed()
        return .building(build)
    }

    /// The current set, when it already is exactly the manifest's: every entry verified in the
    /// current generation and nothing else in it. Then nothing is built (an hourly no-op run
    /// must not make a generation of links each time).
    func currentIsComplete() throws -> Bool {
        guard case .generation = store.current(), let current = try Destination.openExisting(store.identity) else { return false }
        let reconciler = Reconciler(planner: Planner(destination: current, journal: journal, partialFolder: partialFolder), journal: journal)
        for entry in manifest.entries {
            guard case .upToDate = reconciler.action(for: entry) else { return false }
        }
        let files = try current.walk(skippingTopLevel: Destination.stateFolderName).files
        return files.lazy.filter { !keepsExcluded($0.path) }.count == manifest.entries.count
    }

    /// Whether the file at `path` stays in the next set although the manifest (as filtered)
    /// does not list it: the filter leaves it out and `--delete-excluded` was not given.
    func keepsExcluded(_ path: [UInt8]) -> Bool {
        guard let filter, !deleteExcluded else { return false }
        return !filter.selects(path)
    }

    /// Readies the building folder for this manifest: removes what an earlier, stopped run put
    /// there that this manifest does not list, then hard-links each listed file that the building
    /// folder lacks from the current set (`linkat(2)`), unless the journal knows that file as
    /// another version of the entry (it is fetched). A link changes the file's change time, so a
    /// file the journal had verified is journaled again with its new status, after checking that it
    /// is the same inode, size and modification time: it is not hashed again.
    func seed() throws {
        let listed = PathIndex(listing: manifest.entries)
        let leftover = try building.walk(skippingTopLevel: "")
        do {
            let remover = try building.remover()
            for file in leftover.files where !listed.containsFile(file.path) && !keepsExcluded(file.path) {
                _ = try remover.removeFile(file.path, expected: file.status)
            }
        }
        // Every folder left empty; those the manifest's files need are made again when linked.
        _ = try? building.removeEmptyFolders(skippingTopLevel: "", keeping: { _ in false })
        guard current != nil || !kept.isEmpty else { return }
        var linked: [(ManifestEntry, FileStatus)] = []
        for entry in manifest.entries {
            guard try building.status(of: entry.path) == nil else { continue }
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
            // Not linked: fetched instead.
            if try link(entry.path, from: set), verified { linked.append((entry, old)) }
        }
        if let current, filter != nil, !deleteExcluded { try linkExcluded(from: current) }
        CrashPoint.hit("seed-after-links")
        try refreshRecords(linked, in: building)
    }

    /// Links into the building folder each file of the current set that the filter leaves out
    /// (``keepsExcluded(_:)``) and the building folder lacks: what `--exclude` keeps of a plain
    /// DEST, it keeps of an atomic one.
    func linkExcluded(from current: Destination) throws {
        for file in try current.walk(skippingTopLevel: Destination.stateFolderName).files where keepsExcluded(file.path) {
            guard let path = String(validating: file.path, as: UTF8.self), try building.status(of: path) == nil else { continue }
            _ = try link(path, from: current)  // Not linked: not kept, as nothing can fetch it.
        }
    }

    /// Hard-links `path` of `set` to the same path in the building folder (`linkat(2)`). False
    /// when the file system will not link it there (`EMLINK`, `EXDEV`, `EPERM`); any other
    /// failure throws.
    func link(_ path: String, from set: Destination) throws -> Bool {
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

    /// The entry's file in a kept generation, newest first, that the journal verified as this
    /// version (same size, digests, inode, times: ``Journal/isVerified(_:status:)``): rolling
    /// forward to a set a kept generation holds links it, as unchanged files are linked from the
    /// current set, instead of downloading it.
    func keptCopy(of entry: ManifestEntry) -> (Destination, FileStatus)? {
        for set in kept {
            guard let status = try? set.status(of: entry.path), status.isRegularFile,
                  journal.isVerified(entry, status: status) else { continue }
            return (set, status)
        }
        return nil
    }

    /// What a publish did, for the loop to count and report.
    struct Publication {
        /// DEST shows the new generation.
        var published = false
        /// The files of the previous set that the new one drops, reported as deleted.
        var dropped: [EntryResult] = []
        /// The deletion guardrails refused the publish (``DeletionPolicy``), or it failed with
        /// something other than a system call: DEST still holds the previous set.
        var refusal: String?
        /// A system call failed (a full disk, a read-only file system): the run's fatal error.
        var fatal: SystemError?
    }

    /// After a run in which every listed file verified: the files of the current set that the new
    /// one drops pass the deletion guardrails (``DeletionPolicy``), then the building folder is
    /// made durable, named as the next generation and DEST switched to it; old generations beyond
    /// `--keep` go. Otherwise DEST keeps the previous complete set and the next run goes on
    /// building.
    func publish(everyFileVerified: Bool, options: SyncOptions) -> Publication {
        var publication = Publication()
        guard everyFileVerified else {
            report.notice("\(store.destPath) still holds the previous complete set; the next run goes on building the new one")
            return publication
        }
        do {
            let listed = PathIndex(listing: manifest.entries)
            let current = try Destination.openExisting(store.identity)
            let before = try current?.walk(skippingTopLevel: Destination.stateFolderName).files ?? []
            let dropped = before.filter { !listed.containsFile($0.path) && !keepsExcluded($0.path) }
            let policy = options.deletionPolicy
            let decision = policy.decide(.init(candidates: dropped.count, known: before.count,
                                               listed: manifest.entries.count, everyFileVerified: true))
            if let refusal = policy.refusal(decision) {
                publication.refusal = refusal + "; \(store.destPath) still holds the previous set"
                report.fatal(publication.refusal ?? refusal)
                return publication
            }
            try building.syncAll()
            let vouched = verifiedStatuses(in: building)
            let n = try store.sealBuilding()
            try store.switchTo(n)
            publication.published = true
            recordBuiltFrom(generation: n)
            for file in dropped {
                let result = EntryResult(path: String(decoding: file.path, as: UTF8.self), outcome: .deleted, size: file.status.size, source: nil)
                publication.dropped.append(result)
                report.entryFinished(result)
                if let path = String(validating: file.path, as: UTF8.self) { try writer.append(.removed(path: path), durable: false) }
            }
            _ = try store.prune(keep: options.keepGenerations)
            CrashPoint.hit("publish-after-prune")
            if let published = try Destination.openExisting(store.identity) { try refreshRecords(vouched, in: published) }
        } catch let error as SystemError {
            publication.fatal = error
        } catch {
            publication.refusal = "\(store.destPath) still holds the previous set: \(error)"
        }
        return publication
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

    // MARK: - The hold (docs/cli.md, "mirror rollback")

    /// The hold DEST is under, when ``HoldPolicy`` says it applies: then nothing is built,
    /// downloaded or journaled, and the run ends `ok`, exit 0: the hold is what an operator asked
    /// for, and a cron job must not alert on it. A hold that no longer applies (another manifest,
    /// DEST switched by hand) is removed, durably, and the run goes on.
    func hold() throws -> RollbackHold? {
        let state = try store.stateFolder()
        defer { state.close() }
        guard let hold = try HoldFile.readHold(in: state) else { return nil }
        var current: Int?
        if case .generation(let n) = store.current() { current = n }
        switch HoldPolicy.decide(.init(hold: hold, current: current, manifestSHA256: digest())) {
        case .none:
            return nil
        case .hold(let hold):
            report.notice(SyncSummary.heldLine(hold, dest: store.destPath))
            report.logLine("info", SyncSummary.heldLine(hold, dest: store.destPath))
            return hold
        case .release(let hold, let why):
            try HoldFile.removeHold(in: state)
            let reason: String
            switch why {
            case .otherManifest: reason = "this manifest is not the one rolled back from"
            case .moved: reason = "DEST no longer shows generation \(hold.generation)"
            case .unknownManifest: reason = "this manifest's digest cannot be read"
            }
            report.notice("\(store.destPath): released the hold at generation \(hold.generation) (\(reason)); syncing as usual")
            report.logLine("info", "\(store.destPath): released the hold at generation \(hold.generation) (\(reason))")
            return nil
        }
    }

    /// After a publish: generation `n` was built from this run's manifest (``HoldFile``), so a
    /// rollback from `n` knows what to hold against. Without the record a rollback from `n` could
    /// not hold; a failure to write it costs only that, so it is a warning.
    func recordBuiltFrom(generation n: Int) {
        guard let digest = digest() else { return }
        do {
            let state = try store.stateFolder()
            defer { state.close() }
            try HoldFile.recordBuiltFrom(digest, generation: n, existing: try store.generations(), in: state)
        } catch {
            report.warning("cannot record which manifest built generation \(n) (\(error)); a rollback from it will not hold")
        }
    }

    /// A current generation found complete for this manifest was built from it (or from one with
    /// the same files): recorded when nothing is yet, so that a set published by an earlier mirror
    /// can be held after a rollback too.
    func recordBuiltFromIfMissing() {
        guard case .generation(let n) = store.current(), let state = try? store.stateFolder() else { return }
        defer { state.close() }
        if (try? HoldFile.builtFrom(in: state))?[n] == nil { recordBuiltFrom(generation: n) }
    }
}
