import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState

/// `mirror sync --dry-run`: the plan, one line per entry that is not up to date, from the disk and
/// the journal as they are (read-only: nothing is created, locked, fetched or repaired).
struct DryRun {
    let manifest: Manifest
    let report: ConsoleReport
    /// The run's options: its sources (`--prefer`), request settings and `--seed` folders, for
    /// how each entry's bytes would come (``FetchRouter``).
    let options: SyncOptions
    /// DEST as given, to show paths under it when it does not exist yet.
    let destPath: String
    /// Monotonic time of the run's deadline, if any (a chunk index fetched for a delta stops there).
    var deadline: Double?
    /// `--delete`/`--delete-unlisted` and `--max-delete`: the deletions are listed too.
    var deletion: DeletionMode?
    var deletionPolicy = DeletionPolicy()
    /// Entries found up to date while the manifest was read (``PlanLookAhead``), against the same ``ReadOnlyDestination``.
    var known: PlanLookAhead.Decided?

    /// Plans against DEST as ``ReadOnlyDestination/open(_:)`` read it (which throws what the run would stop on
    /// before planning: a destination that cannot be a folder).
    /// `sync --dry-run`: plans against DEST as it is and prints the plan; nothing is created,
    /// locked or fetched but chunk indexes.
    ///
    /// - Parameters:
    ///   - disk: DEST as read while the manifest was parsed (``SyncSession``), if it was.
    ///   - lookAhead: the plan begun against `disk` while the manifest was read, if it was.
    static func run(manifest: Manifest, options: SyncOptions, report: ConsoleReport, destPath: String,
                    disk read: Background<Result<ReadOnlyDestination, Error>>?, lookAhead: PlanLookAhead?) throws -> SyncSummary {
        let deadline = options.deadline.map { monotonicSeconds() + $0 }
        var summary = SyncSummary()
        summary.keepsResults = report.mode == .json
        summary.total = manifest.entries.count
        // An atomic run drops what the manifest does not list: the dry run lists it as deletions.
        // Whether DEST is atomic is read with DEST itself, so the plan never mixes the two.
        let disk: ReadOnlyDestination
        do {
            disk = try read?.value().get() ?? ReadOnlyDestination.open(destPath)
        } catch let error as SystemError {
            throw SyncError.destination(error)
        }
        // A signed manifest the run would refuse (an older serial, an expired one) is refused here too.
        if let sha256 = options.signedManifestSHA256 {
            try SerialGate.admit(manifest, sha256: sha256, state: disk.state, record: false)
        }
        let atomic = options.atomic || disk.isAtomic
        // A conversion the run would refuse (a file of the user's the switch would drop) is
        // refused here too, with the same words (``ConversionCheck``).
        if atomic, let plain = disk.destination, let identity = try? DestinationIdentity.resolve(destPath), ConversionCheck.isDue(identity) {
            try ConversionCheck.require(plain, destPath: destPath, journal: disk.journal, manifest: manifest, options: options)
        }
        return try DryRun(manifest: manifest, report: report, options: options, destPath: destPath, deadline: deadline,
                          deletion: atomic ? .unlisted : options.deletion, deletionPolicy: DeletionPolicy(limit: options.deletionPolicy.limit, remedyNeedsAtomic: atomic && !options.atomic),
                          known: lookAhead?.finish())
            .run(disk: disk, summary: summary)
    }

    func run(disk: ReadOnlyDestination, summary start: SyncSummary) throws -> SyncSummary {
        var summary = start
        var totals = DryRunTotals()
        let (dest, journal, partials) = (disk.destination, disk.journal, disk.partials)
        summary.lastSuccess = journal?.lastSuccess?.end
        let reconciler = Reconciler(planner: Planner(destination: dest, journal: journal, partialFolder: partials),
                                    journal: journal)
        let router = fetchRouter(disk)
        var index = -1
        // One entry at a time, as the run plans: no array of a plan item per entry (10^6 entries
        // held ~280 MB more that way).
        reconciler.forEachAction(in: manifest.entries, known: known) { entry, action in
            index += 1
            let line: String
            // One form of the line, the one asked for (``ItemizedChange`` with --itemize).
            let itemize = options.itemize
            switch action {
            case .upToDate:
                summary.upToDate += 1
                return
            case .check:
                line = itemize ? ItemizedChange(action: .check, reason: "unverified", bytes: 0, source: nil, path: entry.path).line
                    : "check \(entry.path) (present, not yet verified)"
                totals.checks += 1
            case .resume(let offset, _):
                line = itemize ? ItemizedChange(action: .resume, reason: "partial", bytes: max(0, entry.size - offset),
                                                source: firstSource(entry), path: entry.path).line
                    : "resume \(entry.path) at \(Formatting.bytes(offset)) of \(Formatting.bytes(entry.size))"
                totals.files += 1
                totals.bytes = totals.bytes.addingClamped(max(0, entry.size - offset))
            case .download(let replacing):
                let route = router.route(index)
                line = itemize ? ItemizedChange.fetch(entry, replacing: replacing, route, source: firstSource(entry)).line
                    : DryRun.line(entry, replacing: replacing, route)
                totals.add(route, replacing: replacing)
            case .blocked(let why):
                line = itemize ? ItemizedChange(action: .blocked, reason: "not-a-file", bytes: 0, source: nil, path: entry.path).line
                    : "blocked \(entry.path): \(why)"
                totals.blocked += 1
            }
            summary.pending += 1
            report.plan(line, into: &summary)
        }
        if let deletion { totals.deletions = try planDeletions(deletion, reconciler: reconciler, summary: &summary) }
        summary.dryRun = totals
        return summary
    }

    /// The URL an entry's first request would ask (``SourceOrder``: `--prefer` bases first).
    func firstSource(_ entry: ManifestEntry) -> String? {
        options.sourceOrder.sources(forPath: entry.path, manifestSources: manifest.sources(for: entry)).first
    }

    /// The plan line of an entry fetched from zero: `download PATH (SIZE)`, `replace PATH (delta, ≈N of SIZE)`,
    /// `copy PATH from OLD`... (docs/cli.md, `--dry-run`).
    static func line(_ entry: ManifestEntry, replacing: Bool, _ route: FetchRoute) -> String {
        let verb = replacing ? "replace" : "download"
        let size = Formatting.bytes(entry.size)
        switch route {
        case .copy(let from):
            return "copy \(entry.path) from \(from)"
        case .delta(let from, let atItsPath, let fetched):
            let base = atItsPath ? "delta" : "delta from \(from)"
            return "\(verb) \(entry.path) (\(base), ≈\(Formatting.bytes(fetched)) of \(size))"
        case .whole(_, let noDelta?):
            return "\(verb) \(entry.path) (\(size); no delta: \(noDelta))"
        case .whole(_, nil):
            return "\(verb) \(entry.path) (\(size))"
        }
    }

    /// How the entries fetched from zero would get their bytes (``FetchRouter``), with DEST as
    /// ``ReadOnlyDestination`` read it: its journal's files and the `--seed` folders for copies, its files and
    /// partial downloads as older copies for deltas, whose chunk indexes are fetched (small, and
    /// what the delta costs cannot be known without them; docs/cli.md, `--dry-run`).
    private func fetchRouter(_ disk: ReadOnlyDestination) -> FetchRouter {
        let trees = disk.destination.map { [$0] } ?? []
        let contentIndex = ContentIndex(journal: disk.journal, destinations: trees, seeds: options.seeds)
        let copies = OlderCopies(trees: trees, seeds: contentIndex.seeds, partialFolder: disk.partials) { [dest = disk.destination] name in
            dest?.displayState(".mirror/partial/" + name) ?? name
        }
        let (manifest, options, deadline) = (manifest, options, deadline)
        let delta = DeltaPreparation(olderCopy: { copies.find($0, partialName: PartialFile.name(for: $0.path)) }, fetchIndex: { reference, entry in
            let named = manifest.chunkIndexSources(for: entry)
            let urls = options.sourceOrder.sources(forPath: reference.path, manifestSources: named)
            let settings = { (url: String, again: Bool) in options.transferSettings(url: url, revalidate: again, manifestSources: named) }
            return try ChunkIndexFetch(urls: urls, settings: settings, deadline: deadline).fetch(reference, for: entry)
        }, stop: { [stop = RunStop(deadline: deadline)] in stop.isEnding })
        let destPath = destPath
        return FetchRouter(entries: manifest.entries, contentIndex: contentIndex, delta: delta,
                           firstSource: { options.sourceOrder.sources(forPath: $0.path, manifestSources: manifest.sources(for: $0)).first },
                           display: { disk.destination?.display($0) ?? (destPath.hasSuffix("/") ? destPath + $0 : destPath + "/" + $0) })
    }

    /// The files the run would delete once every listed file verifies, or the guardrail that
    /// would stop it (docs/cli.md, "Deleting").
    /// Returns how many files would be deleted (0 when the guardrails refuse).
    private func planDeletions(_ mode: DeletionMode, reconciler: Reconciler, summary: inout SyncSummary) throws -> Int {
        let plan: DeletionPlan
        do { plan = try reconciler.deletions(for: manifest, mode: mode, filter: options.filter, deleteExcluded: options.deleteExcluded) } catch let error as SystemError { throw SyncError.destination(error) }
        let decision = deletionPolicy.decide(.init(candidates: plan.files.count, known: plan.known,
                                                   listed: manifest.entries.count, everyFileVerified: true))
        var lines = plan.changed.map {
            options.itemize ? ItemizedChange(action: .keep, reason: "changed-since-installed", bytes: 0, source: nil, path: $0).line
                : "keep \($0) (changed since mirror installed it; never deleted)"
        }
        if let refusal = deletionPolicy.refusal(decision) {
            summary.deletionRefused = refusal
            report.fatal(refusal)
        } else {
            lines += plan.files.map { file in
                guard options.itemize else { return "delete \(file.display)" }
                let excluded = options.filter.map { !$0.selects(file.path) } ?? false
                return ItemizedChange(action: .delete, reason: excluded ? "excluded" : "unlisted", bytes: 0, source: nil, path: file.display).line
            }
        }
        for line in lines { report.plan(line, into: &summary) }
        if summary.deletionRefused != nil { summary.result = .failed }
        return summary.deletionRefused == nil ? plan.files.count : 0
    }
}

extension DryRunTotals {
    /// Counts an entry fetched from zero by its route; `replacing`: a file at its path goes
    /// (the plan line says `replace`, and so do the totals).
    mutating func add(_ route: FetchRoute, replacing: Bool = false) {
        switch route {
        case .copy: copies += 1
        case .delta: deltas += 1; files += 1; replacements += replacing ? 1 : 0
        case .whole: files += 1; replacements += replacing ? 1 : 0
        }
        bytes = bytes.addingClamped(route.fetchedBytes)
    }
}
