import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// The work of one entry in a run, on the sync thread: an attempt started (a local copy, a chunk
/// delta, or its partial file opened and its requests made), what each ended request means, its
/// segments, retries and sources, a checksum mismatch and a republish. It holds what that work
/// needs and nothing of the run's own state: it moves the entry's ``EntryState`` and returns
/// ``EntryEffect``s, which the loop (``SyncRunner``) carries out on its queues, its install
/// batch, its summary and its ending.
final class EntryWork {
    let options: SyncOptions
    let manifest: Manifest
    let place: RunPlace
    let threads: RunThreads
    /// Whether the run is ending, and its deadline (``RunStop``).
    let stop: RunStop
    /// Connections still free within the run's limit (``Scheduler/freeConnections``).
    let freeConnections: () -> Int
    /// Asks whether the manifest was republished during the run, after wrong bytes (``ManifestWatch``).
    let manifestWatch: ManifestWatch?
    let report: ConsoleReport
    /// Hosts that stopped answering in this run, and the entries that failed for it alone.
    var reachability = HostReachability()
    /// What the work asked of the loop since the loop last took it (``take(_:)``).
    private var effects: [EntryEffect] = []

    var retryPolicy: RetryPolicy { RetryPolicy(retries: options.retries, baseDelay: options.retryBaseDelay) }
    var segmentPolicy: SegmentPolicy { SegmentPolicy(maxConnections: options.segments, threshold: options.segmentThreshold) }

    init(options: SyncOptions, manifest: Manifest, place: RunPlace, threads: RunThreads, stop: RunStop,
         freeConnections: @escaping () -> Int, manifestWatch: ManifestWatch?, report: ConsoleReport) {
        self.options = options
        self.manifest = manifest
        self.place = place
        self.threads = threads
        self.stop = stop
        self.freeConnections = freeConnections
        self.manifestWatch = manifestWatch
        self.report = report
    }

    /// Asks the loop for `effect`, after those asked before it.
    func emit(_ effect: EntryEffect) { effects.append(effect) }

    /// Runs one piece of work and returns what it asks of the loop, in order. The buffer is
    /// handed over whole and a new empty one (no allocation) takes its place.
    func take(_ work: () -> Void) -> [EntryEffect] {
        work()
        defer { effects = [] }
        return effects
    }

    // MARK: - An attempt

    /// Starts the next attempt of `task`: opens its partial file, picks a source, submits.
    func start(_ task: EntryTask) -> [EntryEffect] { take { startAttempt(task) } }

    /// One request of `task` ended (``Scheduler/ended(_:)`` found its entry).
    func finished(_ download: Download, of task: EntryTask) -> [EntryEffect] {
        take {
            task.downloads.removeAll { $0 === download }
            if download.segment != nil {
                handleSegment(download, of: task)
            } else {
                handleWhole(download, of: task)
            }
        }
    }

    /// Opens `task`'s partial file under `DEST/.mirror/partial/` (a fresh one unless `resumeFrom`
    /// or `saved` says what an earlier run or a local copy left there), hashed by the next writer
    /// thread of the pool (``PartialWriterPool``).
    func openPartial(for task: EntryTask, resumeFrom: Int64 = 0, saved: PartialRecord? = nil) throws -> PartialFile {
        try PartialFile(identity: EntryIdentity(task.entry), name: task.partialName, folder: place.partialFolder,
                        folderDisplay: place.destination.displayState(".mirror/partial"), journal: place.writer,
                        writer: threads.writers.writer(), resumeFrom: resumeFrom, saved: saved, naming: place.partialNaming,
                        pieces: task.entry.pieces)
    }

    private func startAttempt(_ task: EntryTask) {
        task.move(to: .fetching)
        task.mirrors.wake()
        do {
            // Bytes already on this machine come first: they need no source, reachable or not.
            if task.partial == nil, copyLocally(task) {
                task.partial = try openPartial(for: task, resumeFrom: task.entry.size)
                task.partial?.sourceURL = task.attempt.copiedFrom.map { "file://" + $0 }
                emit(.install(task))
                return
            }
            // A host that refused twice is not asked again in this run; the check comes before
            // any file is created, so a dead server leaves nothing behind (D3 in docs/faults.md).
            while let source = task.currentSource, reachability.isGivenUp(source) {
                task.history.skipped(.unreachable("\(redactedURL(source)) did not answer earlier in this run"))
                if !task.source.advance() { break }
            }
            if task.currentSource == nil && task.entry.size > 0 {
                giveUp(task)
                return
            }
            if task.partial == nil, let url = task.currentSource, startDelta(task, url: url), task.partial == nil { return }
            if task.partial == nil {
                let partial = try openPartial(for: task, resumeFrom: task.resumeOffset, saved: task.resume)
                if partial.length > 0, let record = task.resume {
                    partial.sourceURL = record.url
                    partial.validator = record.validator
                }
                if partial.keptAtResume > 0 { emit(.resumed(kept: partial.keptAtResume, rehashed: partial.rehashedAtResume)) }
                task.partial = partial
            }
            guard let partial = task.partial else { return }
            if task.attempt.fromZero && partial.length > 0 { partial.restartFromZero() }
            task.attempt.fromZero = false
            if partial.isComplete {
                // Nothing left to fetch (an empty file, or a partial that was already whole).
                emit(.install(task))
                return
            }
            guard let url = task.currentSource else {
                giveUp(task)
                return
            }
            // The validator belongs to the URL it came from (journaled with its credentials masked).
            let sameSource = partial.sourceURL.map { $0 == url || redactedURL($0) == redactedURL(url) } ?? false
            if !sameSource && partial.length > 0 && !partial.spreadsSources {
                // Another source (a mirror, or a changed base_url): its validator cannot be compared
                // with the old one, so no If-Range is sent and its answer sets the validator anew.
                // The bytes may then come from two servers; the digest check catches a splice, and
                // the file is fetched again from zero (docs/faults.md, "resume on another source").
                partial.validator = nil
            }
            // A source whose file an earlier run refused is asked, in one stream, whether it still
            // holds that file (``RefusedBook``): a 304 costs no download.
            let refused = partial.length == 0 ? place.refused.refusal(for: task.entry, url: url) : nil
            if refused == nil && partial.length == 0 && !partial.isSegmented
                && segmentPolicy.wantsSegments(size: task.entry.size, url: url, sourceRefusedRanges: task.segments.refused) {
                try partial.beginSegments(length: SegmentPolicy.segmentLength(size: task.entry.size, connections: options.segments))
                if spreads(task) { partial.spreadsSources = true }
            }
            task.attempt.begin(at: partial.length)
            if partial.isSegmented {
                try startSegments(task, url: url, ifRange: sameSource ? partial.validator : nil)
                return
            }
            let download = try Download(url: url, offset: partial.length, ifRange: sameSource ? partial.validator : nil,
                                        target: partial, settings: transferSettings(for: task, url: url),
                                        unlessStill: refused?.conditionalHeader)
            partial.noteOrigin(segment: 0, from: partial.length, url: url)
            submit(download, for: task)
        } catch {
            stopOrFail(task, error)
        }
    }

    /// The task lists the request at once (its segments count it); the loop hands it to a
    /// transfer thread.
    /// The settings of one request of `task` at `url`: it asks caches to revalidate once that URL
    /// gave wrong bytes; a `--prefer` URL does not get the `--auth-header-env` header, which is
    /// meant for the manifest's sources; and netrc credentials go only to the origins of
    /// `manifestSources` (the entry's own URLs unless given: a chunk index has its own) and of the
    /// manifest URL (``CredentialScope``).
    func transferSettings(for task: EntryTask, url: String, manifestSources: [String]? = nil) -> TransferSettings {
        options.transferSettings(url: url, revalidate: task.history.revalidating.contains(url),
                                 manifestSources: manifestSources ?? manifest.sources(for: task.entry))
    }

    /// Whether `url` is one of `entry`'s `--prefer` URLs and none of the manifest's own: a source
    /// that is passed over at once when it refuses, throttles or stalls (``RetryPolicy``).
    func isPreferredOnly(_ url: String, of entry: ManifestEntry) -> Bool {
        options.sourceOrder.isPreferred(url) && !manifest.sources(for: entry).contains(url)
    }

    func submit(_ download: Download, for task: EntryTask) {
        task.downloads.append(download)
        emit(.submit(download, task))
    }

    /// The one request of an entry that is not segmented ended.
    private func handleWhole(_ download: Download, of task: EntryTask) {
        switch download.outcome ?? .failed(.cancelled) {
        case .complete:
            emit(.install(task))
        case .rangeNotSatisfiable:
            if task.partial?.isComplete == true {
                emit(.install(task))
            } else {
                task.attempt.fromZero = true
                retry(task, after: .badContentRange("416 Range Not Satisfiable", expected: "bytes \(download.requestedOffset)-"))
            }
        case .notModified:
            refusedAgain(task, download)
        case .failed(.cancelled) where task.attempt.wholeFileDeclined:
            task.attempt.wholeFileDeclined = false
            restartFromZero(task)
        case .failed(.cancelled):
            task.partial?.checkpoint()
            task.move(to: .leftForLaterRun)
            emit(.pending)
        case .failed(.rangeIgnored):
            restartFromZero(task)
        case .failed(_) where task.partial?.wrongPiece != nil:
            wrongPieceFound(task)
        case .failed(let failure):
            attemptFailed(task, failure)
        }
    }

    /// The server answered a resume with the whole file, and the transfer waits, paused, with its
    /// body (``Download/WholeFile``): the journal forgets the old bytes and the file is cut, on
    /// this thread (docs/journal.md, rule 1), then the body is taken from its first byte. No
    /// second request, and nothing the server sent is thrown away. When the manifest changed
    /// under the run, the transfer is cancelled instead and the entry left for the next run.
    func wholeFileOffered(_ download: Download, of task: EntryTask) -> [EntryEffect] {
        take {
            guard let partial = task.partial, partial === download.target else {
                threads.transfers.cancel([download])
                return
            }
            if let watch = manifestWatch, watch.hasChanged(now: monotonicSeconds(), deadline: stop.deadline) {
                // Back comes a cancelled transfer, which then goes where a refused one went
                // (``restartFromZero(_:)``: the entry is left for the run of the new manifest).
                task.attempt.wholeFileDeclined = true
                threads.transfers.cancel([download])
                return
            }
            if partial.length > 0 { emit(.rangeIgnored(source: download.url, path: task.entry.path, dropped: partial.length)) }
            partial.restartFromZero()
            task.attempt.begin(at: 0)
            threads.transfers.acceptWholeFile(download)
        }
    }

    /// A resume whose whole-file answer could not be taken as it came (the manifest changed under
    /// the run, or a `file:` URL, which is read whole): asked first, whether the manifest changed, which
    /// leaves the entry for the next run (``manifestChanged(under:partial:)``). Otherwise the entry
    /// starts over from zero at once, no back-off and no failure counted: the partial file is cut
    /// on the sync thread, after the journal forgets it (docs/journal.md, rule 1); the transfer
    /// thread never journals (docs/architecture.md, "Threads").
    func restartFromZero(_ task: EntryTask) {
        if let partial = task.partial, partial.length > 0, manifestChanged(under: task, partial: partial) { return }
        task.attempt.fromZero = true
        emit(.queue(task))
    }

    /// A failed attempt at the whole entry: a write error stops the entry (or the run, when the
    /// destination refuses writes); anything else is retried.
    func attemptFailed(_ task: EntryTask, _ failure: TransferFailure) {
        task.partial?.checkpoint()
        if case .writeFailed(let error) = failure {
            if error.isDestinationUnwritable { emit(.pending) }
            stopOrFail(task, error)
        } else if case .validatorChanged = failure, let partial = task.partial, manifestChanged(under: task, partial: partial) {
            return
        } else {
            retry(task, after: failure)
        }
    }
}
