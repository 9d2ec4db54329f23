/// `mirror sync --dry-run`: the plan, one line per entry that is not up to date, from the disk and
/// the journal as they are (read-only: nothing is created, locked, fetched or repaired).
struct DryRun {
    let manifest: Manifest
    let report: ConsoleReport
    /// `--delete`/`--delete-unlisted` and `--max-delete`: the deletions are listed too.
    var deletion: DeletionMode?
    var deletionPolicy = DeletionPolicy()
    /// Entries found up to date while the manifest was read (``PlanLookAhead``), against the same `Disk`.
    var known: PlanLookAhead.Decided?

    /// What a dry run reads of DEST, read-only: the folder (nil when it does not exist yet), its
    /// journal and its partial-download folder (nil when there are none).
    struct Disk {
        var destination: Destination?
        var journal: Journal?
        var partials: FileDescriptor?
        /// DEST is a generation store (`--atomic`), as seen when it was opened.
        var isAtomic: Bool

        /// Opens DEST without creating, locking or repairing anything. Independent of the
        /// manifest, so ``SyncSession`` starts it (``Background``) before the manifest is parsed.
        static func open(_ destPath: String) throws -> Disk {
            let atomic = GenerationStore.isAtomic(destPath)
            let dest: Destination?
            do { dest = try Destination.openExisting(destPath) } catch let error as SystemError { throw SyncError.destination(error) }
            let state = try? dest?.stateFolder(create: false)
            let journal = state.flatMap { try? Journal(folder: $0, displayPath: destPath + "/.mirror/journal", readOnly: true) }
            let partials = try? dest?.stateFolder("partial", create: false)
            return Disk(destination: dest, journal: journal, partials: partials ?? nil, isAtomic: atomic)
        }
    }

    /// Plans against DEST as ``Disk/open(_:)`` read it (which throws what the run would stop on
    /// before planning: a destination that cannot be a folder).
    func run(disk: Disk, summary start: SyncSummary) throws -> SyncSummary {
        var summary = start
        var totals = DryRunTotals()
        let (dest, journal, partials) = (disk.destination, disk.journal, disk.partials)
        summary.lastSuccess = journal?.lastSuccess?.end
        let reconciler = Reconciler(planner: Planner(destination: dest, journal: journal, partialFolder: partials),
                                    journal: journal)
        // One entry at a time, as the run plans: no array of a plan item per entry (10^6 entries
        // held ~280 MB more that way).
        reconciler.forEachAction(in: manifest.entries, known: known) { entry, action in
            let line: String
            switch action {
            case .upToDate:
                summary.upToDate += 1
                return
            case .check:
                line = "check \(entry.path) (present, not yet verified)"
                totals.checks += 1
            case .resume(let offset, _):
                line = "resume \(entry.path) at \(Formatting.bytes(offset)) of \(Formatting.bytes(entry.size))"
                totals.files += 1
                totals.bytes += max(0, entry.size - offset)
            case .download(let replacing):
                line = "\(replacing ? "replace" : "download") \(entry.path) (\(Formatting.bytes(entry.size)))"
                totals.files += 1
                totals.bytes += entry.size
            case .blocked(let why):
                line = "blocked \(entry.path): \(why)"
                totals.blocked += 1
            }
            summary.pending += 1
            report.plan(line, into: &summary)
        }
        if let deletion { totals.deletions = try planDeletions(deletion, reconciler: reconciler, summary: &summary) }
        summary.dryRun = totals
        return summary
    }

    /// The files the run would delete once every listed file verifies, or the guardrail that
    /// would stop it (docs/cli.md, "Deleting").
    /// Returns how many files would be deleted (0 when the guardrails refuse).
    private func planDeletions(_ mode: DeletionMode, reconciler: Reconciler, summary: inout SyncSummary) throws -> Int {
        let plan: DeletionPlan
        do { plan = try reconciler.deletions(for: manifest, mode: mode) } catch let error as SystemError { throw SyncError.destination(error) }
        let decision = deletionPolicy.decide(.init(candidates: plan.files.count, known: plan.known,
                                                   listed: manifest.entries.count, everyFileVerified: true))
        var lines = plan.changed.map { "keep \($0) (changed since mirror installed it; never deleted)" }
        if let refusal = deletionPolicy.refusal(decision) {
            summary.deletionRefused = refusal
            report.fatal(refusal)
        } else {
            lines += plan.files.map { "delete \($0.display)" }
        }
        for line in lines { report.plan(line, into: &summary) }
        if summary.deletionRefused != nil { summary.result = .failed }
        return summary.deletionRefused == nil ? plan.files.count : 0
    }
}
