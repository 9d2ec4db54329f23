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
    /// What seeding found in the current set: the files the next set drops, and how many it held
    /// (nil before ``seed()``).
    private(set) var seeded: GenerationSeed.Outcome?
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
    /// `known`: the entries found up to date in the current set while the manifest was read
    /// (``PlanLookAhead``).
    static func start(_ place: RunPlace, manifest: Manifest, options: SyncOptions, digest: @escaping () -> String?,
                      report: ConsoleReport, known: PlanLookAhead.Decided? = nil) throws -> Start? {
        guard let store = place.generations else { return nil }
        var build = AtomicBuild(store: store, building: place.destination, current: place.current,
                                kept: place.keptGenerations, partialFolder: place.partialFolder, manifest: manifest,
                                filter: options.filter, deleteExcluded: options.deleteExcluded, writer: place.writer,
                                digest: digest, report: report)
        try store.sweepLeftovers()
        if let hold = try build.hold() { return .held(hold) }
        if try build.currentIsComplete(known: known) {
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
    ///
    /// As a plain no-op decides, at its cost: each entry's `stat` in the current set against its
    /// journal record (``Reconciler``, on a thread per core, and for the entries the look-ahead
    /// decided while the manifest was read, not again), stopping at the first that is not up to
    /// date; then a count of the set's files from its folders' listings (``FileCount``): as many
    /// as the entries means nothing else is there. With a filter whose left-out files stay in the
    /// set, or a set too deep to count, the set is walked instead (``walkedSetIsComplete(_:)``).
    func currentIsComplete(known: PlanLookAhead.Decided?) throws -> Bool {
        guard case .generation = store.current(), let current = try Destination.openExisting(store.identity) else { return false }
        if filter != nil && !deleteExcluded { return try walkedSetIsComplete(current) }
        struct NotUpToDate: Error {}
        let reconciler = Reconciler(planner: Planner(destination: current, journal: journal, partialFolder: partialFolder), journal: journal)
        do {
            try reconciler.forEachAction(in: manifest.entries, known: known) { _, action in
                guard case .upToDate = action else { throw NotUpToDate() }
            }
        } catch is NotUpToDate {
            return false
        }
        guard let count = try FileCount.nonFolders(under: current.root, skippingTopLevel: Array(Destination.stateFolderName.utf8)) else {
            return try walkedSetIsComplete(current)
        }
        return count == manifest.entries.count
    }

    /// ``currentIsComplete(known:)`` by one walk of `current` (the generation DEST shows), one
    /// `fstatat` per file relative to its open folder, and nothing kept of it: for a set a filter
    /// left files in.
    private func walkedSetIsComplete(_ current: Destination) throws -> Bool {
        let entries = manifest.entries
        let listed = PathIndex(listing: entries)
        let reconciler = Reconciler(planner: Planner(destination: current, journal: journal, partialFolder: partialFolder), journal: journal)
        struct Part: Sendable {
            var complete = true
            var found = 0
        }
        let journal = journal, keepsExcluded = excludedKept
        // A top-level folder per thread (``SetWalk``).
        let parts = try SetWalk(set: current).walk({ Part() }) { file, part in
            guard part.complete else { return }
            guard let index = file.path.withUnsafeBufferPointer({ listed.entryIndex($0) }) else {
                if !keepsExcluded(file.path) { part.complete = false }
                return
            }
            let entry = entries[index]
            // The no-op path on the walk's own `stat`; a record it cannot read in place is
            // asked of the planner, as a run would.
            if FoundFilePolicy.current.keeps(file.status, for: entry) && journal.isVerified(entry, status: file.status) {
                part.found += 1
            } else if case .upToDate = reconciler.action(for: entry) {
                part.found += 1
            } else {
                part.complete = false
            }
        }
        return parts.allSatisfy(\.complete) && parts.reduce(0, { $0 + $1.found }) == entries.count
    }

    /// Whether the file at `path` stays in the next set although the manifest (as filtered)
    /// does not list it: the filter leaves it out and `--delete-excluded` was not given.
    func keepsExcluded(_ path: [UInt8]) -> Bool { excludedKept(path) }

    /// ``keepsExcluded(_:)`` as a value the parallel walks (``SetWalk``) can take.
    var excludedKept: @Sendable ([UInt8]) -> Bool {
        let filter = filter, deleteExcluded = deleteExcluded
        return { path in
            guard let filter, !deleteExcluded else { return false }
            return !filter.selects(path)
        }
    }

    /// Readies the building folder for this manifest: removes what an earlier, stopped run put
    /// there that this manifest does not list, then hard-links into it the files of the current
    /// set (and of kept generations) that the next set keeps (``GenerationSeed``). A link changes
    /// the file's change time, which the journal allows for a file of this user's that nobody
    /// else may write (``ChangeTimeTrust``); only a file whose mode lets group or others write is
    /// journaled again with its new status (``refreshRecords(_:in:)``).
    ///
    /// A path the filter leaves out is the current set's (docs/cli.md, "Choosing what a machine
    /// syncs"): what a stopped run left there (another manifest's version, a file the current set
    /// lacks) goes, unless it is the current set's very file, linked by an earlier seeding.
    /// Listed paths keep what a stopped build left: the plan checks each against the journal.
    mutating func seed() throws {
        let listed = PathIndex(listing: manifest.entries)
        let leftover = try building.walk(skippingTopLevel: "")
        do {
            let remover = try building.remover()
            for file in leftover.files where !listed.containsFile(file.path) {
                if keepsExcluded(file.path), isCurrentSetsFile(file) { continue }
                _ = try remover.removeFile(file.path, expected: file.status)
            }
        }
        // Every folder left empty; those the manifest's files need are made again when linked.
        _ = try? building.removeEmptyFolders(skippingTopLevel: "", keeping: { _ in false })
        let seed = GenerationSeed(building: building, current: current, kept: kept, manifest: manifest, journal: journal,
                                  keepsExcluded: excludedKept)
        let outcome = try seed.run()
        seeded = outcome
        CrashPoint.hit("seed-after-links")
        try refreshRecords(outcome.untrusted, in: building)
        // A kept generation's file hashed and linked: verified now, as a file found and hashed
        // is, once the `syncfs` of the building folder's file system made it durable
        // (``FoundRecords``); mirror put it in the store, so it is journaled as installed, not `found=1`.
        if !outcome.hashed.isEmpty {
            let records = outcome.hashed.map { entry, status in VerifiedRecord(identity: EntryIdentity(entry), status: status) }
            try writer.append(verified: records, proof: try building.syncAll())
        }
    }

    /// Whether `file` of the building folder is the current set's file at the same path (one
    /// inode, `fstatat(2)` of the current set): a link an earlier seeding made.
    private func isCurrentSetsFile(_ file: (path: [UInt8], status: FileStatus)) -> Bool {
        guard let current, let status = try? file.path.withUnsafeBufferPointer({ try current.status(ofBytes: $0) }) else {
            return false
        }
        return status.sameFile(as: file.status)
    }

    /// What a publish did, for the loop to count and report.
    struct Publication {
        /// DEST shows the new generation.
        var published = false
        /// The generation published, and the one DEST showed before, when it was one.
        var generation: Int?
        var previous: Int?
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
            let (dropped, known) = try droppedFiles()
            var policy = options.deletionPolicy
            policy.remedyNeedsAtomic = !options.atomic
            let decision = policy.decide(.init(candidates: dropped.count, known: known,
                                               listed: manifest.entries.count, everyFileVerified: true))
            if let refusal = policy.refusal(decision) {
                publication.refusal = refusal + "; \(store.destPath) still holds the previous set"
                report.fatal(publication.refusal ?? refusal)
                return publication
            }
            try building.syncAll()
            let vouched = verifiedStatuses(in: building)
            if case .generation(let shown) = store.current() { publication.previous = shown }
            let n = try store.sealBuilding()
            try store.switchTo(n)
            publication.published = true
            publication.generation = n
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

    /// The files of the current set that the next one drops, and how many files the current set
    /// holds: found by seeding's walk (DEST's lock has been held since), else by a walk now.
    func droppedFiles() throws -> (dropped: [(path: [UInt8], status: FileStatus)], known: Int) {
        if let seeded { return (seeded.dropped, seeded.currentFiles) }
        let listed = PathIndex(listing: manifest.entries)
        let before = try Destination.openExisting(store.identity)?.walk(skippingTopLevel: Destination.stateFolderName).files ?? []
        return (before.filter { !listed.containsFile($0.path) && !keepsExcluded($0.path) }.map { ($0.path, $0.status) }, before.count)
    }

    /// The status of each listed file the journal vouches for in `set` and whose record a moved
    /// change time would undo: those whose mode lets group or others write
    /// (``ChangeTimeTrust``). Every other file in the set is this user's with the entry's mode
    /// (``FoundFilePolicy``), so no second pass over the entries is made for them.
    func verifiedStatuses(in set: Destination) -> [(ManifestEntry, FileStatus)] {
        manifest.entries.compactMap { entry in
            guard FoundFilePolicy.wantedMode(entry) & 0o022 != 0, let status = try? set.status(of: entry.path),
                  !ChangeTimeTrust.current.trustsMovedChangeTime(status), journal.isVerified(entry, status: status) else { return nil }
            return (entry, status)
        }
    }

    /// Removing a tree of links (a plain DEST's old folder, a pruned generation) changes the link
    /// count, and so the change time, of every file the published set shares with it. A file the
    /// journal would not trust with a moved change time is journaled again with its new status,
    /// if it still is the same inode, size and modification time; otherwise its record would no
    /// longer match and the next run would hash it (docs/journal.md, "Atomic destinations").
    /// These records vouch for no byte anew: the same inode, size and modification time as the
    /// record the journal holds (``JournalWriter/restate(_:)``).
    func refreshRecords(_ vouched: [(ManifestEntry, FileStatus)], in set: Destination) throws {
        var records: [VerifiedRecord] = []
        for (entry, before) in vouched {
            guard let now = try? set.status(of: entry.path), now != before, now.sameFile(as: before),
                  now.size == before.size, now.mtime == before.mtime else { continue }
            let adopted = journal.records(for: entry.path)?.verified?.adopted ?? false
            records.append(VerifiedRecord(identity: EntryIdentity(entry), status: now, adopted: adopted))
        }
        try writer.restate(records)
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
