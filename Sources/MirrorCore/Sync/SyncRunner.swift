#if canImport(Glibc)
import Glibc
#endif

/// One `mirror sync` run: plan, transfer, verify, install, journal.
///
/// Where a byte goes: libcurl hands it to ``Download`` on the transfer thread
/// (`Transfer/TransferEngine.swift`), which checks the response and writes it into the entry's
/// ``PartialFile`` under `DEST/.mirror/partial/`; the ``PartialWriter`` thread hashes it and makes
/// it durable at checkpoints. When the last byte is in, this runner (on the calling thread)
/// compares the digests with the manifest, seals the file (mode, mtime) and hands it to an
/// ``InstallBatch``, which makes it durable, renames it into place
/// (``Destination/install(partial:from:to:syncFolder:expected:)``) and only then journals it as verified.
public final class SyncRunner {
    let manifest: Manifest
    let options: SyncOptions
    let report: ConsoleReport

    private var summary = SyncSummary()
    private var destination: Destination!
    private var partialFolder: FileDescriptor!
    private var journal: Journal!
    private var engine: TransferEngine?
    private var ready: [EntryTask] = []
    private var waiting: [EntryTask] = []
    private var active: [ObjectIdentifier: EntryTask] = [:]
    private var allTasks: [EntryTask] = []
    private var unreachableHosts: Set<String> = []
    /// Failures to reach each host since it last answered (``RetryPolicy/Facts/hostUnreachableFailures``).
    private var unreachableCounts: [String: Int] = [:]
    private let batch = InstallBatch()
    private var retryPolicy: RetryPolicy { RetryPolicy(retries: options.retries, baseDelay: options.retryBaseDelay) }
    private var segmentPolicy: SegmentPolicy { SegmentPolicy(maxConnections: options.segments, threshold: options.segmentThreshold) }
    private var writer: PartialWriter?
    /// A destination error that stops the whole run (disk full, read-only): exit 73.
    private var fatal: SystemError?
    private var stoppedReason: String?
    private let startTime = monotonicSeconds()

    public init(manifest: Manifest, options: SyncOptions, report: ConsoleReport) {
        self.manifest = manifest
        self.options = options
        self.report = report
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
        if options.dryRun { return dryRun(destPath) }

        let lock: DestinationLock
        do {
            destination = try Destination.create(destPath)
            guard let state = try destination.stateFolder(create: true),
                  let partials = try destination.stateFolder("partial", create: true) else {
                throw SystemError("create", destination.display(Destination.stateFolderName), code: ENOENT)
            }
            // Nobody else may have written what the run is about to trust (SECURITY.md).
            try StateOwnership.require(state, destination.display(Destination.stateFolderName))
            try StateOwnership.require(partials, destination.display(".mirror/partial"))
            partialFolder = partials
            lock = try DestinationLock(stateFolder: state, destination: destPath, wait: options.waitForLock)
            journal = try Journal(folder: state, displayPath: destination.display(".mirror/journal"), readOnly: false)
            if journal.needsCompaction(liveEntries: manifest.entries.count) { try compactJournal() }
        } catch let error as SystemError {
            throw SyncError.destination(error)
        } catch let failure as DestinationLock.Failure {
            throw SyncError.locked(failure)
        }
        defer { lock.release() }

        let planner = Planner(destination: destination, journal: journal, partialFolder: partialFolder)
        var checks: [ManifestEntry] = []
        for entry in manifest.entries {
            switch SyncRunner.action(for: entry, planner) {
            case .upToDate: summary.upToDate += 1
            case .check: checks.append(entry)
            case .resume(let offset, let record): addTask(entry, replacing: false, resume: record, offset: offset)
            case .download(let replacing): addTask(entry, replacing: replacing)
            case .blocked(let why): fail(entry, why, unreachable: false)
            }
        }

        if !ready.isEmpty || !checks.isEmpty { try transferAndCheck(checks) }

        finishRun()
        if let fatal { throw SyncError.destination(fatal) }
        return summary
    }

    // MARK: - Planning helpers

    /// The plan for one entry, for the run and the dry run alike: a path that cannot even be
    /// inspected (a permission error on a folder) blocks that entry, not the whole run.
    private static func action(for entry: ManifestEntry, _ planner: Planner) -> PlannedAction {
        do {
            return try planner.action(for: entry)
        } catch {
            return .blocked("\(error)")
        }
    }

    private func addTask(_ entry: ManifestEntry, replacing: Bool, resume: PartialRecord? = nil, offset: Int64 = 0) {
        let task = EntryTask(entry: entry, sources: manifest.sources(for: entry), replacing: replacing,
                             resume: resume, resumeOffset: offset)
        ready.append(task)
        allTasks.append(task)
    }

    private func dryRun(_ destPath: String) -> SyncSummary {
        let dest = try? Destination.openExisting(destPath)
        let state = try? dest?.stateFolder(create: false)
        let journal = state.flatMap { try? Journal(folder: $0, displayPath: destPath + "/.mirror/journal", readOnly: true) }
        let partials = try? dest?.stateFolder("partial", create: false)
        let planner = Planner(destination: dest ?? nil, journal: journal, partialFolder: partials ?? nil)
        for entry in manifest.entries {
            let line: String
            switch SyncRunner.action(for: entry, planner) {
            case .upToDate:
                summary.upToDate += 1
                continue
            case .check: line = "check \(entry.path) (present, not yet verified)"
            case .resume(let offset, _): line = "resume \(entry.path) at \(Formatting.bytes(offset)) of \(Formatting.bytes(entry.size))"
            case .download(let replacing):
                line = "\(replacing ? "replace" : "download") \(entry.path) (\(Formatting.bytes(entry.size)))"
            case .blocked(let why): line = "blocked \(entry.path): \(why)"
            }
            summary.plan.append(line)
            summary.pending += 1
            report.notice(line)
        }
        return summary
    }

    // MARK: - The loop

    private func transferAndCheck(_ checksIn: [ManifestEntry]) throws {
        var checks = checksIn[...]
        do { engine = try TransferEngine(connectionsPerHost: connectionLimit, limitRate: options.limitRate) } catch { throw SyncError.setup("\(error)") }
        let writer = PartialWriter()
        self.writer = writer
        defer {
            engine?.shutdown()
            writer.shutdown()
        }
        let deadline = options.deadline.map { startTime + $0 }

        while fatal == nil {
            let now = monotonicSeconds()
            if let deadline, now >= deadline {
                stoppedReason = "deadline passed"
                break
            }
            if StopSignal.received != 0 {
                stoppedReason = StopSignal.received == SIGTERM ? "terminated (SIGTERM)" : "interrupted (SIGINT)"
                break
            }
            promoteDueTasks(now)
            while runningTasks < max(1, options.jobs), active.count < connectionLimit, !ready.isEmpty {
                start(ready.removeFirst())
            }
            if batch.isDue(now: now) { commitBatch() }
            if active.isEmpty && ready.isEmpty && waiting.isEmpty && checks.isEmpty { break }

            if let entry = checks.first {
                // Hash one present file on this thread while the transfer thread downloads others.
                checks = checks.dropFirst()
                check(entry)
                showProgress()
                handle(engine?.waitForFinished(timeout: 0) ?? [])
                continue
            }
            var wait = 0.5
            if let next = waiting.map(\.notBefore).min() { wait = min(wait, max(0.001, next - now)) }
            if let deadline { wait = min(wait, max(0.001, deadline - now)) }
            if let due = batch.timeUntilDue(now: now) { wait = min(wait, max(0.001, due)) }
            if report.progress != nil { wait = min(wait, ProgressDisplay.minimumInterval) }
            if let due = widenSegments(now) { wait = min(wait, due) }
            showProgress()
            handle(engine?.waitForFinished(timeout: wait) ?? [])
        }

        // Stopping early (deadline or a fatal error): cancel what runs and keep its progress.
        stopping = true
        if !active.isEmpty {
            engine?.cancelAll()
            while !active.isEmpty { handle(engine?.waitForFinished(timeout: 1) ?? []) }
        }
        // Files verified before the stop are installed, whatever stopped the run: even on a full
        // disk a rename needs no data blocks, and if it fails the file stays in .mirror/partial.
        commitBatch()
        let unfinished = ready.count + waiting.count + checks.count
        if unfinished > 0 || stoppedReason != nil {
            summary.pending += unfinished
            if stoppedReason == nil { stoppedReason = "stopped early" }
        }
        for task in ready + waiting { task.partial?.checkpoint() }
        // Every checkpoint asked for above is written and journaled before the run reports.
        writer.drainAll()
        for task in allTasks {
            if let failure = task.partial?.failure, failure.isDestinationUnwritable, fatal == nil { fatal = failure }
        }
    }

    private func showProgress() {
        report.transferProgress(tasks: allTasks, active: Array(active.values), finished: summary.changed + summary.failed)
    }

    private func promoteDueTasks(_ now: Double) {
        guard !waiting.isEmpty else { return }
        var still: [EntryTask] = []
        for task in waiting {
            if task.notBefore <= now { ready.append(task) } else { still.append(task) }
        }
        waiting = still
    }

    /// Starts the next attempt of `task`: opens its partial file, picks a source, submits.
    private func start(_ task: EntryTask) {
        do {
            // A host that refused twice is not asked again in this run; the check comes before
            // any file is created, so a dead server leaves nothing behind (D3 in docs/faults.md).
            while let source = task.currentSource, !unreachableHosts.isEmpty, unreachableHosts.contains(hostKey(of: source)) {
                task.lastFailure = .unreachable("\(redactedURL(source)) did not answer earlier in this run")
                task.skippedUnreachable = true
                if !task.advanceSource() { break }
            }
            if task.currentSource == nil && task.entry.size > 0 {
                giveUp(task)
                return
            }
            if task.partial == nil {
                let partial = try PartialFile(identity: EntryIdentity(task.entry),
                                              folder: partialFolder, folderDisplay: destination.display(".mirror/partial"),
                                              journal: journal, writer: writer, resumeFrom: task.resumeOffset, saved: task.resume)
                if partial.length > 0, let record = task.resume {
                    partial.sourceURL = record.url
                    partial.validator = record.validator
                }
                task.partial = partial
            }
            guard let partial = task.partial else { return }
            if task.fromZero && partial.length > 0 { partial.restartFromZero() }
            task.fromZero = false
            if partial.isComplete {
                // Nothing left to fetch (an empty file, or a partial that was already whole).
                verifyAndInstall(task)
                return
            }
            guard let url = task.currentSource else {
                giveUp(task)
                return
            }
            // The validator belongs to the URL it came from (journaled with its credentials masked).
            let sameSource = partial.sourceURL.map { $0 == url || redactedURL($0) == redactedURL(url) } ?? false
            if !sameSource && partial.length > 0 {
                // Another source (a mirror, or a changed base_url): its validator cannot be compared
                // with the old one, so no If-Range is sent and its answer sets the validator anew.
                // The bytes may then come from two servers; the digest check catches a splice, and
                // the file is fetched again from zero (docs/faults.md, "resume on another source").
                partial.validator = nil
            }
            if partial.length == 0 && !partial.isSegmented
                && segmentPolicy.wantsSegments(size: task.entry.size, url: url, sourceRefusedRanges: task.noSegments) {
                try partial.beginSegments(length: SegmentPolicy.segmentLength(size: task.entry.size, connections: options.segments))
            }
            task.attempts += 1
            task.lengthAtAttemptStart = partial.length
            if partial.isSegmented {
                try startSegments(task, url: url, ifRange: sameSource ? partial.validator : nil)
                return
            }
            let download = try Download(url: url, offset: partial.length, ifRange: sameSource ? partial.validator : nil,
                                        target: partial, settings: options.transfer)
            submit(download, for: task)
        } catch {
            stopOrFail(task.entry, error)
        }
    }

    /// Connections at once, for every file together: `--jobs`, or `--segments` if more.
    private var connectionLimit: Int { max(1, options.jobs, options.segments) }

    /// Entries with at least one request running (at most `--jobs`).
    private var runningTasks = 0

    /// Set once the run stops early; no segment is restarted after that.
    private var stopping = false

    private func submit(_ download: Download, for task: EntryTask) {
        if task.downloads.isEmpty { runningTasks += 1 }
        task.downloads.append(download)
        active[ObjectIdentifier(download)] = task
        engine?.submit(download)
    }

    /// Starts requests for the lowest open segments that have none running: up to the file's
    /// current width (at most `--segments`), within the connection limit (at least one, so a large
    /// file never waits for small ones to finish).
    private func startSegments(_ task: EntryTask, url: String, ifRange: String?) throws {
        guard let partial = task.partial else { return }
        // The first quarter second of the width is counted from the first request, not from the
        // loop turn that prepared the file (preallocation can take a while).
        if task.widthDecidedAt == nil, let writer { task.widthDecidedAt = (monotonicSeconds(), writer.idleSeconds) }
        let running = Set(task.downloads.compactMap(\.segment))
        // At most --segments requests for this file, and (beyond its first) within the connection limit.
        var room = min(min(task.segmentWidth, options.segments) - task.downloads.count, max(1, connectionLimit - active.count))
        for open in partial.openSegments() where !running.contains(open.index) && room > 0 {
            let download = try Download(url: url, offset: open.from, ifRange: ifRange, target: partial,
                                        settings: options.transfer, segment: (open.index, open.end))
            submit(download, for: task)
            room -= 1
        }
    }

    /// Widens the segmented files whose hash waited for bytes (``SegmentPolicy/widen(waited:running:width:)``).
    ///
    /// - Returns: seconds until the next decision is due, or nil when no file can widen.
    private func widenSegments(_ now: Double) -> Double? {
        guard options.segments > 1, let writer, !stopping else { return nil }
        var idle: Double?
        var nextDue: Double?
        var seen = Set<ObjectIdentifier>()
        for task in active.values where seen.insert(ObjectIdentifier(task)).inserted
            && task.segmentWidth < options.segments && task.segmentFailure == nil && task.downloads.first?.segment != nil {
            let idleNow = idle ?? writer.idleSeconds
            idle = idleNow
            defer { nextDue = min(nextDue ?? .infinity, (task.widthDecidedAt?.time ?? now) + SegmentPolicy.widenInterval - now) }
            // Set by the file's first startSegments.
            guard let last = task.widthDecidedAt else { continue }
            let span = now - last.time
            // The sync loop wakes on time, give or take a millisecond.
            guard span >= SegmentPolicy.widenInterval * 0.95 else { continue }
            task.widthDecidedAt = (now, idleNow)
            guard let width = segmentPolicy.widen(waited: (idleNow - last.idle) / span, running: task.downloads.count,
                                                  width: task.segmentWidth) else { continue }
            task.segmentWidth = width
            continueSegments(task)
        }
        return nextDue.map { max(0.001, $0) }
    }

    private func handle(_ finished: [Download]) {
        for download in finished {
            guard let task = active.removeValue(forKey: ObjectIdentifier(download)) else { continue }
            task.downloads.removeAll { $0 === download }
            if task.downloads.isEmpty { runningTasks -= 1 }
            if download.segment != nil {
                handleSegment(download, of: task)
                continue
            }
            switch download.outcome ?? .failed(.cancelled) {
            case .complete:
                verifyAndInstall(task)
            case .rangeNotSatisfiable:
                if task.partial?.isComplete == true {
                    verifyAndInstall(task)
                } else {
                    task.fromZero = true
                    retry(task, after: .badContentRange("416 Range Not Satisfiable", expected: "bytes \(download.requestedOffset)-"))
                }
            case .failed(.cancelled):
                task.partial?.checkpoint()
                summary.pending += 1
            case .failed(let failure):
                attemptFailed(task, failure)
            }
        }
    }

    /// A failed attempt at the whole entry: a write error stops the entry (or the run, when the
    /// destination refuses writes); anything else is retried.
    private func attemptFailed(_ task: EntryTask, _ failure: TransferFailure) {
        task.partial?.checkpoint()
        if case .writeFailed(let error) = failure {
            if error.isDestinationUnwritable { summary.pending += 1 }
            stopOrFail(task.entry, error)
        } else {
            retry(task, after: failure)
        }
    }

    /// One segment's request ended. A segment that dropped after real progress is asked for again
    /// at once, on its own; any other failure stops the entry's other segments and, once they are
    /// all back, is handled like a failed attempt at the whole entry. A source that ignores or
    /// garbles ranges turns the entry into one stream from its contiguous prefix.
    private func handleSegment(_ download: Download, of task: EntryTask) {
        let outcome = download.outcome ?? .failed(.cancelled)
        switch outcome {
        case .complete:
            // Segments the connection limit held back start as others finish.
            if task.segmentFailure == nil && !isStopping, task.partial?.isComplete == false { continueSegments(task) }
        case .failed(.cancelled):
            break
        case .rangeNotSatisfiable:
            segmentFailed(task, .badContentRange("416 Range Not Satisfiable",
                                                 expected: "bytes \(download.requestedOffset)-\(download.requestedEnd ?? 0)"))
        case .failed(let failure):
            let action = segmentPolicy.afterSegmentFailure(failure, received: download.bytesWritten,
                                                           requested: download.requestedEnd.map { $0 + 1 - download.requestedOffset } ?? 1,
                                                           entryFailing: task.segmentFailure != nil, stopping: isStopping)
            if action == .retrySegment,
               let url = task.currentSource, let partial = task.partial {
                task.attempts += 1
                task.failuresWithoutProgress = 0
                do {
                    try startSegments(task, url: url, ifRange: partial.validator)
                } catch {
                    segmentFailed(task, .network(code: 0, message: "\(error)", transient: true))
                }
            } else {
                segmentFailed(task, failure)
            }
        }
        guard task.downloads.isEmpty, let partial = task.partial else { return }
        if let failure = task.segmentFailure {
            task.segmentFailure = nil
            if failure == .rangeIgnored || failure.distrustsRanges {
                partial.abandonSegments()
                task.noSegments = true
            }
            attemptFailed(task, failure)
        } else if partial.isComplete {
            verifyAndInstall(task)
        } else if isStopping {
            partial.checkpoint()
            summary.pending += 1
        } else if task.currentSource != nil {
            // A segment ended cleanly short of its end (cancelled by nothing we know): continue.
            continueSegments(task)
        } else {
            giveUp(task)
        }
    }

    /// The run is ending (deadline, fatal error or signal): no segment starts any more.
    private var isStopping: Bool { stopping || StopSignal.received != 0 }

    /// Starts what the file's width allows of its open segments, from its current source.
    private func continueSegments(_ task: EntryTask) {
        guard let url = task.currentSource, let partial = task.partial else { return }
        do { try startSegments(task, url: url, ifRange: partial.validator) } catch { stopOrFail(task.entry, error) }
    }

    private func segmentFailed(_ task: EntryTask, _ failure: TransferFailure) {
        if task.segmentFailure == nil { task.segmentFailure = failure }
        engine?.cancel(task.downloads)
    }

    /// Decides what follows a failed attempt: the same source after a back-off, the next source, or
    /// giving up. Retries are bounded per source by attempts that made no progress, so a connection
    /// that drops every few hundred megabytes still finishes, and a dead one does not loop.
    private func retry(_ task: EntryTask, after failure: TransferFailure) {
        task.lastFailure = failure
        if case .unreachable = failure {} else { task.onlyUnreachable = false }
        if failure.distrustsRanges { task.fromZero = true }
        let host = task.currentSource.map(hostKey(of:)) ?? ""
        if case .unreachable = failure { unreachableCounts[host, default: 0] += 1 } else { unreachableCounts[host] = nil }
        let facts = RetryPolicy.Facts(failure: failure, progress: (task.partial?.length ?? 0) - task.lengthAtAttemptStart,
                                      remainingAtStart: task.entry.size - task.lengthAtAttemptStart,
                                      failuresWithoutProgress: task.failuresWithoutProgress, attempts: task.attempts,
                                      jitter: Double.random(in: 0.5..<1.5), hostUnreachableFailures: unreachableCounts[host] ?? 0)
        let decision = retryPolicy.decide(facts)
        task.failuresWithoutProgress = decision.failuresWithoutProgress
        switch decision.action {
        case .stop:
            return giveUp(task)
        case .nextSource(let markHost):
            if markHost, case .unreachable(let why) = failure, let source = task.currentSource,
               unreachableHosts.insert(hostKey(of: source)).inserted {
                report.warning("cannot reach \(hostKey(of: source)): \(why); its other files are left for a later run")
            }
            guard task.advanceSource() else { return giveUp(task) }
            task.notBefore = 0
            ready.append(task)
            return
        case .retry(let delay):
            task.notBefore = monotonicSeconds() + delay
        }
        releaseIfEmpty(task)
        waiting.append(task)
    }

    /// A task that waits (back-off) or ends with no byte received gives its empty partial file
    /// back: thousands of entries waiting for a dead server must not hold thousands of open files
    /// (EMFILE) or leave empty files behind. It is created again when bytes can arrive.
    private func releaseIfEmpty(_ task: EntryTask) {
        guard let partial = task.partial, partial.length == 0, !partial.isSegmented, task.downloads.isEmpty else { return }
        partial.settle()
        partial.remove()
        task.partial = nil
    }

    private func giveUp(_ task: EntryTask) {
        let why = task.lastFailure.map { "\($0)" } ?? "no source to fetch it from"
        let source = task.sources.last.map { " (last tried \(redactedURL($0)))" } ?? ""
        releaseIfEmpty(task)
        task.partial?.close()
        if task.skippedUnreachable && task.onlyUnreachable {
            // Never asked: its host stopped answering earlier in this run (said once, when it was
            // marked). The entry is left for a later run, like one a deadline stopped.
            notTried += 1
            summary.pending += 1
            return
        }
        fail(task.entry, why + source, unreachable: task.onlyUnreachable && task.lastFailure != nil)
    }

    // MARK: - Verify and install

    private func verifyAndInstall(_ task: EntryTask) {
        guard let partial = task.partial else { return }
        let entry = task.entry
        let sha256: Digest?, sha512: Digest?
        do {
            (sha256, sha512) = try partial.finishDigests()
        } catch {
            stopOrFail(entry, error)
            return
        }
        guard FileHashing.matches(entry, sha256: sha256, sha512: sha512) else {
            task.checksumFailures += 1
            task.onlyUnreachable = false
            let detail = FileHashing.mismatchDescription(entry, sha256: sha256, sha512: sha512)
            partial.restartFromZero()
            if task.checksumFailures >= options.checksumAttempts || entry.size == 0 {
                partial.settle()
                partial.remove()
                let attempts = task.checksumFailures == 1 ? "1 attempt" : "\(task.checksumFailures) attempts"
                fail(entry, "checksum mismatch after \(attempts) (\(detail))", unreachable: false)
                return
            }
            // A corrupt copy: try the next source if there is one, else the same again from zero.
            if task.sourceIndex + 1 < task.sources.count { task.sourceIndex += 1 }
            task.lastFailure = .network(code: 0, message: "checksum mismatch (\(detail))", transient: true)
            task.fromZero = true
            ready.append(task)
            return
        }
        do {
            try partial.seal(mode: entry.mode ?? 0o644, mtime: entry.mtime, sync: false)
            batch.add(task, partial)
            if batch.isDue(now: monotonicSeconds()) { commitBatch() }
        } catch {
            stopOrFail(entry, error)
        }
    }

    /// Makes the waiting verified files durable, renames them into place and journals them
    /// (``InstallBatch`` explains the order and why it is crash-safe).
    private func commitBatch() {
        let items = batch.take()
        guard !items.isEmpty else { return }
        let single = items.count == 1
        do {
            if single { try items[0].partial.file.sync() } else { try partialFolder.syncFilesystem() }
        } catch let error as SystemError {
            for item in items { item.partial.close() }
            if error.isDestinationUnwritable { fatal = error } else {
                for item in items { fail(item.task.entry, error.description, unreachable: false) }
            }
            return
        } catch {}

        var installed: [(InstallBatch.Item, FileStatus)] = []
        for item in items {
            defer { item.partial.close() }
            do {
                let status = try destination.install(partial: item.partial.name, from: partialFolder,
                                                     to: item.task.entry.path, syncFolder: single,
                                                     expected: item.partial.file)
                installed.append((item, status))
            } catch {
                stopOrFail(item.task.entry, error)
            }
        }
        do {
            if !single && !installed.isEmpty { try partialFolder.syncFilesystem() }
            CrashPoint.hit("install-before-record")
            for (item, status) in installed {
                let entry = item.task.entry
                try journal.append(.verified(VerifiedRecord(identity: EntryIdentity(entry), status: status)), durable: false)
            }
            try journal.sync()
        } catch let error as SystemError {
            // The files are in place and complete; without their records the next run hashes them.
            if error.isDestinationUnwritable { fatal = error }
        } catch {}
        for (item, _) in installed {
            let task = item.task
            let entry = task.entry
            if task.replacing { summary.replaced += 1 } else { summary.downloaded += 1 }
            let source = entry.size == 0 ? nil : item.partial.sourceURL
            let result = EntryResult(path: entry.path, outcome: task.replacing ? .replaced : .downloaded, size: entry.size,
                                     source: source.map(redactedURL),
                                     fromMirror: source != nil && source != task.sources.first)
            summary.results.append(result)
            report.entryFinished(result)
        }
    }

    /// Hashes a file that is at its path but unknown to the journal. A match is journaled; a
    /// mismatch is fetched again, and the present file stays until the new copy verifies.
    private func check(_ entry: ManifestEntry) {
        do {
            let file = try destination.openForReading(entry.path)
            let before = try file.stat()
            let (sha256, sha512) = try FileHashing.digests(of: file, for: entry)
            let status = try file.stat()
            // A file written while it was read may hold bytes other than those hashed: it is
            // vouched for only if its change time did not move (a later run checks it again).
            if FileHashing.matches(entry, sha256: sha256, sha512: sha512), status == before {
                try journal.append(.verified(VerifiedRecord(identity: EntryIdentity(entry), status: status)), durable: false)
                summary.checked += 1
            } else {
                addTask(entry, replacing: true)
            }
        } catch let error as SystemError {
            if error.isDestinationUnwritable && error.operation != "open" { fatal = error } else { fail(entry, error.description, unreachable: false) }
        } catch {
            fail(entry, "\(error)", unreachable: false)
        }
    }

    // MARK: - Results

    private var unreachableFailures = 0
    /// Entries never asked for because their host had stopped answering (counted as not finished).
    private var notTried = 0

    /// A system error while handling `entry`: when the destination itself refuses writes (full,
    /// read-only, permissions) the whole run stops with exit 73; otherwise only the entry fails.
    private func stopOrFail(_ entry: ManifestEntry, _ error: Error) {
        if let error = error as? SystemError, error.isDestinationUnwritable {
            fatal = error
        } else {
            fail(entry, "\(error)", unreachable: false)
        }
    }

    private func fail(_ entry: ManifestEntry, _ failure: String, unreachable: Bool) {
        // Masked once here for every place it goes: console, --json, the log and the journal.
        let message = redactingURLs(in: failure)
        summary.failed += 1
        if unreachable { unreachableFailures += 1 }
        let result = EntryResult(path: entry.path, outcome: .failed(message), size: entry.size, source: nil)
        summary.results.append(result)
        report.entryFinished(result)
        try? journal?.append(.failed(FailedRecord(identity: EntryIdentity(entry), error: message, time: Int64(currentUnixTime()))), durable: false)
    }

    private func finishRun() {
        if let partialFolder {
            // A partial that no task of this run owns belongs to no entry of the manifest (an
            // up-to-date entry needs none): nothing will ever resume it.
            var keep = Set<String>()
            for task in allTasks { keep.insert(PartialFile.name(for: task.entry.path)) }
            PartialSweep.removeOrphans(in: partialFolder, keeping: keep)
        }
        summary.bytesTransferred = allTasks.reduce(0) { $0 + ($1.partial?.bytesReceived ?? 0) }
        summary.seconds = monotonicSeconds() - startTime
        if let stoppedReason {
            summary.result = .incomplete(stoppedReason)
        } else if (summary.failed > 0 || notTried > 0) && summary.failed == unreachableFailures {
            summary.result = .incomplete("no source could be reached")
        } else if summary.failed > 0 {
            summary.result = .failed
        } else if fatal != nil {
            summary.result = .failed
        }
        let run = RunRecord(start: Int64(currentUnixTime() - summary.seconds), end: Int64(currentUnixTime()),
                            result: summary.result.name, downloaded: summary.changed, failed: summary.failed,
                            bytes: summary.bytesTransferred)
        do {
            try journal.append(.run(run), durable: false)
            if journal.needsCompaction(liveEntries: manifest.entries.count) { try compactJournal() }
            try journal.sync()
        } catch let error as SystemError {
            if fatal == nil && error.isDestinationUnwritable { fatal = error }
        } catch {}
    }

    private func compactJournal() throws {
        var current: Set<EntryIdentity> = []
        current.reserveCapacity(manifest.entries.count)
        for entry in manifest.entries { current.insert(EntryIdentity(entry)) }
        try journal.compact(isCurrent: { current.contains($0) })
    }
}
