import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// One `mirror sync` run: plan, transfer, verify, install, journal.
///
/// Where a byte goes: libcurl hands it to ``Download`` on the transfer thread
/// (`Transfer/TransferEngine.swift`), which checks the response and writes it into the entry's
/// ``PartialFile`` under `DEST/.mirror/partial/`; the ``PartialWriter`` thread hashes it and makes
/// it durable at checkpoints (its journal records are built by ``PartialJournal``). When the last
/// byte is in, this runner (on the calling thread) has the ``Installer`` compare the digests with
/// the manifest and seal the file (mode, mtime); its ``InstallBatch`` makes it durable, renames it
/// into place (``Destination/install(partial:from:to:syncFolder:expected:)``) and only then
/// journals it as verified. Which entry starts when, and when the run stops, is the ``Scheduler``'s.
///
/// This type is the loop (docs/architecture.md, "An entry's life"): it opens the run's place
/// (``RunPlace``), plans, asks each entry's work (``EntryWork``) what to do and carries out the
/// ``EntryEffect``s it returns on the queues, the install batch, the summary and the ending
/// (``RunEnding``), then ends the run: publish or `--delete`, the `run` record.
public final class SyncRunner {
    let manifest: Manifest
    let options: SyncOptions
    let report: ConsoleReport

    var summary = SyncSummary()
    /// Where the run works, opened under DEST's lock (``RunPlace``): nil until then.
    var place: RunPlace?
    /// The queue, the slots, the deadline and the stop.
    let scheduler: Scheduler
    /// The run's tasks, those installed and let go, and those held for another's content.
    var tasks = RunTasks()
    /// The work of each entry (``EntryWork``), made when the transfer threads start.
    var work: EntryWork?
    /// `--atomic`: the generation this run builds, once its folder is seeded (``AtomicBuild``);
    /// only then is there one to publish.
    var build: AtomicBuild?
    /// Where the manifest came from, its digest and its watch (``ManifestOrigin``), set by ``SyncSession``.
    public var origin = ManifestOrigin()
    /// DEST's lock and journal, taken while the manifest was read (``EarlyPlace``), set by
    /// ``SyncSession``; the run takes them over when it opens its place.
    var early: EarlyPlace?
    /// The entries found up to date in the set DEST shows while the manifest was read
    /// (``PlanLookAhead``), by index.
    var knownUpToDate: PlanLookAhead.Decided?
    /// What stopped the run short, if anything, and the result it ends with (``RunEnding``).
    var ending = RunEnding()
    /// Files found in place and verified, whose records wait for their batch's `syncfs`.
    var found = FoundRecords()
    /// Hosts that answered a resume with the whole file, said once each (``EntryEffect/rangeIgnored(source:path:dropped:)``).
    var rangeIgnoredHosts: Set<String> = []
    let startTime: Double

    public init(manifest: Manifest, options: SyncOptions, report: ConsoleReport) {
        self.manifest = manifest
        self.options = options
        self.report = report
        summary.keepsResults = report.mode == .json
        let start = monotonicSeconds()
        startTime = start
        scheduler = Scheduler(jobs: options.jobs, connectionLimit: options.connectionPolicy.requests,
                              stop: RunStop(deadline: options.deadline.map { start + $0 }), readAhead: options.jobs)
    }

    /// Where the files go: `--dest`, else the manifest's `destination` relative to its folder.
    public static func destinationPath(manifest: Manifest, options: SyncOptions) throws -> String {
        if let dest = options.destination { return dest }
        guard let dest = manifest.destination else { throw SyncError.noDestination(manifest: manifest.sourceName) }
        if dest.hasPrefix("/") { return dest }
        let path = options.manifestPath
        guard let slash = path.lastIndex(of: "/") else { return dest }
        return String(path[...slash]) + dest
    }

    public func run() throws -> SyncSummary {
        let destPath = try SyncRunner.destinationPath(manifest: manifest, options: options)
        summary.total = manifest.entries.count
        let lock: DestinationLock
        do {
            let place = try RunPlace.open(destPath, manifest: manifest, options: options, report: report, early: early?.handOver())
            self.place = place
            // What this run selects, for `status` and `verify` run without options (docs/cli.md).
            do {
                try RememberedSelection.write(options.filter?.rules, in: place.stateFolder)
            } catch {
                report.warning("cannot record this run's selection for status and verify: \(error)")
            }
            lock = place.lock
            switch try AtomicBuild.start(place, manifest: manifest, options: options, digest: origin.digest, report: report,
                                         known: knownUpToDate) {
            case nil:
                break
            case .held(let hold):
                summary.hold = hold
                summary.seconds = monotonicSeconds() - startTime
                summary.lastSuccess = journal.lastSuccess?.end
                lock.release()
                return summary
            case .complete:
                summary.upToDate = manifest.entries.count
                finishRun()
                lock.release()
                if let fatal = ending.fatal { throw SyncStopped(cause: .destination(fatal), summary: summary) }
                return summary
            case .building(let build):
                self.build = build
            }
        } catch let error as SystemError {
            throw SyncError.destination(error)
        } catch let failure as DestinationLock.Failure {
            throw SyncError.locked(failure)
        }
        defer { lock.release() }

        let reconciler = Reconciler(planner: Planner(destination: destination, journal: journal, partialFolder: partialFolder),
                                    journal: journal)
        var checks: [ManifestEntry] = []
        let planned = PlannedEntries(entries: manifest.entries) { [unowned self] entry, replacing in
            makeTask(entry, replacing: replacing)
        }
        scheduler.planned = planned
        var index = 0
        // What the look-ahead found is of the set DEST shows: a plan for DEST itself, not for an
        // atomic run's building folder.
        reconciler.forEachAction(in: manifest.entries, known: build == nil ? knownUpToDate : nil) { entry, action in
            switch action {
            case .upToDate: summary.upToDate += 1
            case .check: checks.append(entry)
            case .resume(let offset, let record): planned.append(makeTask(entry, replacing: false, resume: record, offset: offset))
            case .download(let replacing): planned.append(index: index, replacing: replacing)
            case .blocked(let why): fail(entry, why, unreachable: false, cause: .blocked)
            }
            index += 1
        }

        do {
            try requireSpace()
        } catch {
            // Stopped before the first request: the run record keeps why, for `status`.
            ending.spaceStop = error
            summary.pending += scheduler.readyCount
            finishRun()
            throw (error as? SyncError).map { SyncStopped(cause: $0, summary: summary) } ?? error
        }
        holdDuplicates()
        journal.reserveVerified(additional: scheduler.readyCount)
        if scheduler.readyCount > 0 || !checks.isEmpty { try transferAndCheck(checks) }

        finishRun()
        if let fatal = ending.fatal { throw SyncStopped(cause: .destination(fatal), summary: summary) }
        return summary
    }

    /// Writes the sources refused (``RefusedBook``) when the run changed them, dropping those of
    /// paths the manifest no longer lists with the same identity. A failure costs the next run a
    /// download at most: a warning.
    func saveRefusals() {
        guard let place else { return }
        let refused = place.refused
        guard refused.changed || !refused.isEmpty else { return }
        let entries = manifest.entries, listed = PathIndex(listing: entries), filter = options.filter
        do {
            try refused.save(in: place.stateFolder) { path -> EntryIdentity?? in
                let bytes = Array(path.utf8)
                if let filter, !filter.selects(bytes) { return nil }
                return .some(bytes.withUnsafeBufferPointer { listed.entryIndex($0) }.map { EntryIdentity(entries[$0]) })
            }
        } catch {
            report.warning("cannot record which sources hold a file refused before (\(error)); the next run asks for them again")
        }
    }

    // MARK: - Planning helpers

    /// Queues an entry found during the run (a present file that holds other bytes, or that may
    /// not stay as it is: `copyingFound`, its bytes are copied from it first).
    func addTask(_ entry: ManifestEntry, replacing: Bool, copyingFound: Bool = false, foundIsMirrors: Bool = false) {
        let task = makeTask(entry, replacing: replacing)
        task.attempt.copyFound = copyingFound
        task.attempt.foundIsMirrors = foundIsMirrors
        scheduler.enqueue(task)
    }

    /// The entry's task, listed among the run's tasks: at planning for a resume, else when the
    /// entry comes up to start (``PlannedEntries``).
    func makeTask(_ entry: ManifestEntry, replacing: Bool, resume: PartialRecord? = nil, offset: Int64 = 0) -> EntryTask {
        let sources = options.sourceOrder.sources(forPath: entry.path, manifestSources: manifest.sources(for: entry))
        let task = EntryTask(entry: entry, sources: sources, replacing: replacing,
                             resume: resume, resumeOffset: offset)
        tasks.add(task)
        return task
    }

    // MARK: - The loop

    func transferAndCheck(_ checksIn: [ManifestEntry]) throws {
        var checks = checksIn[...]
        let threads: RunThreads
        do {
            threads = try RunThreads(options: options)
        } catch {
            throw SyncError.setup("\(error)")
        }
        defer {
            summary.link = threads.link
            threads.shutdown()
        }
        guard let place else { return }
        work = EntryWork(options: options, manifest: manifest, place: place, threads: threads, stop: scheduler.stop,
                         freeConnections: { [unowned scheduler] in scheduler.freeConnections },
                         manifestWatch: origin.watch, report: report)
        let engine = threads.transfers

        while ending.fatal == nil {
            let now = monotonicSeconds()
            if let reason = scheduler.stop.reason() {
                ending.stoppedReason = reason
                break
            }
            scheduler.promoteDue(now: now)
            // Nothing starts once a signal came or the deadline passed (a delta set aside at the
            // stop must not start as a whole download the same turn).
            while !scheduler.stop.isEnding, let task = scheduler.nextToStart() { start(task) }
            collectCommits()
            if installer?.isDue(now: now) == true { dispatchCommit() }
            if scheduler.isIdle && checks.isEmpty {
                guard tasks.heldCount > 0 else { break }
                // Entries wait for content whose file is verified but not yet in place: install
                // it now (never wait for a batch when nothing else runs), which releases them.
                commitBatch()
                if scheduler.isIdle { releaseAllDuplicates() }
                continue
            }

            if let entry = checks.first {
                // Hash one present file on this thread while the transfer thread downloads others.
                checks = checks.dropFirst()
                check(entry)
                if checks.isEmpty { recordFound() }
                showProgress()
                handle(engine.waitForFinished(timeout: 0))
                continue
            }
            var wait = scheduler.timeUntilDue(now: now)
            // A due batch waits for the commit in progress, which ends this wait when it is done.
            if let due = installer?.timeUntilDue(now: now), !threads.committer.isBusy { wait = min(wait, max(0.001, due)) }
            if report.progress != nil { wait = min(wait, ProgressDisplay.minimumInterval) }
            if let due = widenSegments(now) { wait = min(wait, due) }
            showProgress()
            handle(engine.waitForFinished(timeout: wait))
        }

        // Stopping early (deadline or a fatal error): cancel what runs and keep its progress.
        scheduler.stop.stop()
        if scheduler.runningRequests > 0 {
            engine.cancelAll()
            while scheduler.runningRequests > 0 { handle(engine.waitForFinished(timeout: 1)) }
        }
        // Files verified before the stop are installed, whatever stopped the run: even on a full
        // disk a rename needs no data blocks, and if it fails the file stays in .mirror/partial.
        commitBatch()
        recordFound()
        let unstarted = scheduler.unstarted
        let unfinished = scheduler.unstartedCount + checks.count + tasks.heldCount
        if unfinished > 0 || ending.stoppedReason != nil {
            summary.pending += unfinished
            ending.keepFirstStop("stopped early")
        }
        for task in unstarted {
            task.partial?.checkpoint()
            task.move(to: .leftForLaterRun)
        }
        tasks.leaveHeld()
        // Every checkpoint asked for above is written and journaled before the run reports.
        threads.writers.drainAll()
        for task in tasks.all {
            if let failure = task.partial?.failure, failure.isDestinationUnwritable { ending.keepFirstFatal(failure) }
        }
        // Every entry the run took up has ended: installed, failed, or left for a later run
        // (docs/architecture.md, "An entry's life").
        assert(tasks.all.allSatisfy(\.state.isEnded),
               "entries that never ended: \(tasks.all.filter { !$0.state.isEnded }.prefix(3).map { "\($0.entry.path) \($0.state)" })")
    }

    func showProgress() {
        // Without a progress block (--quiet, not a terminal) the loop's turns build no lists for it.
        guard report.progress != nil else { return }
        report.transferProgress {
            RunProgress.counts(tasks: tasks.all, retired: tasks.retired,
                               planned: (scheduler.planned?.unmade ?? 0, scheduler.planned?.unmadeBytes ?? 0),
                               active: scheduler.activeTasks, waiting: scheduler.waiting, finished: summary.changed + summary.failed)
        }
    }

    /// Publishes the atomic build (``AtomicBuild/publish(everyFileVerified:options:)``) and
    /// counts what it did.
    func publish(_ build: AtomicBuild) {
        let publication = build.publish(everyFileVerified: everyFileVerified, options: options)
        for result in publication.dropped {
            summary.deleted += 1
            summary.add(result)
        }
        if let refusal = publication.refusal { summary.deletionRefused = refusal }
        if let fatal = publication.fatal { ending.keepFirstFatal(fatal) }
        if let generation = publication.generation {
            summary.published = SyncSummary.Published(generation: generation, previous: publication.previous)
        }
    }

    func finishRun() {
        if let error = ending.fatal { ending.fatal = explainedFatal(error) }
        if let partialFolder {
            // A partial that no task of this run owns belongs to no entry that could resume it:
            // an entry not in the manifest, one that is up to date, one planned from zero whose
            // task is not made yet (it starts anew when it is), or one downloaded with no name
            // (PartialNaming), whose journal record was forgotten. Every entry that could resume
            // has its task from planning (PlannedEntries).
            PartialSweep.removeOrphans(in: partialFolder) {
                Set(tasks.all.lazy.filter { !$0.isRetired && $0.partial?.isUnnamed != true }.map(\.partialName))
            }
        }
        if generations != nil {
            if let build { publish(build) }
        } else if let mode = options.deletion {
            deleteUnlisted(mode)
        }
        saveRefusals()
        summary.bytesTransferred = tasks.bytesReceived
        summary.seconds = monotonicSeconds() - startTime
        summary.result = ending.result(summary: summary, failedUnreachable: work?.reachability.entriesFailedUnreachable ?? 0)
        let run = RunRecord(start: Int64(currentUnixTime() - summary.seconds), end: Int64(currentUnixTime()),
                            result: summary.result.name, downloaded: summary.changed, failed: summary.failed,
                            bytes: summary.bytesTransferred, reason: RunReason.text(fatal: ending.fatal ?? ending.spaceStop, result: summary.result),
                            manifest: origin.source?.rawValue)
        summary.lastSuccess = run.succeeded ? run.end : journal.lastSuccess?.end
        do {
            // Durable before a compaction, which may fail (a full disk) and must not take the
            // run's record with it.
            try writer.append(.run(run), durable: true)
            if journal.needsCompaction(liveEntries: manifest.entries.count) { try RunPlace.compactJournal(writer, for: manifest) }
        } catch let error as SystemError {
            if error.isDestinationUnwritable { ending.keepFirstFatal(error) }
        } catch {}
    }
}

/// What the run reads of its place (``RunPlace``), by the names the loop's parts use. Each is
/// nil (or fails when forced) before the place is opened, which the run does first.
extension SyncRunner {
    var destination: Destination! { place?.destination }
    var partialFolder: FileDescriptor! { place?.partialFolder }
    var writer: JournalWriter! { place?.writer }
    var journal: Journal { writer.journal }
    var generations: GenerationStore? { place?.generations }
    var installer: Installer? { place?.installer }
    var contentIndex: ContentIndex? { place?.contentIndex }
    /// The transfer, hashing and commit threads, while the transfers run (``RunThreads``).
    var threads: RunThreads? { work?.threads }
}
