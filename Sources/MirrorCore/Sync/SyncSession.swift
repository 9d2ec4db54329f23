import MirrorFS
import MirrorKit
import MirrorModel

/// What one `mirror sync` command asks for, its options parsed.
public struct SyncRequest: Sendable {
    /// A path, or an `https://`, `http://` or `file://` URL.
    public var manifest: String
    public var options: SyncOptions
    /// `--jitter`: seconds of the longest random delay before starting.
    public var jitter: Double?
    /// `--trust` (PEM files, or folders of them; any one may have signed) and `--signature` (the
    /// signature file, default `MANIFEST.sig`).
    public var trustKeys: [String]
    public var signature: String?
    /// `--keyring`: the OpenPGP keyring that checks a checksum list's or Metalink file's signature.
    public var keyring: String?
    public var metricsFile: String?
    public var logFile: String?
    public var json: Bool
    /// Unix time the command started (for the metrics file).
    public var started: Double

    public init(manifest: String, options: SyncOptions, jitter: Double?, trustKeys: [String], signature: String?,
                metricsFile: String?, logFile: String?, json: Bool, started: Double, keyring: String? = nil) {
        self.keyring = keyring
        self.manifest = manifest
        self.options = options
        self.jitter = jitter
        self.trustKeys = trustKeys
        self.signature = signature
        self.metricsFile = metricsFile
        self.logFile = logFile
        self.json = json
        self.started = started
    }
}

/// One `mirror sync` command from start to exit code: the jitter delay, the manifest (local or
/// fetched, its signature checked with `--trust`), the run itself (``SyncRunner``), then the
/// reports that outlive it (the log file, the metrics file, `--json` for a run that ended before
/// planning). Every way a run can end is mapped to one exit code of docs/cli.md here, so the
/// executable only parses arguments and exits with the code returned.
public enum SyncSession {
    public static func run(_ request: SyncRequest, report: ConsoleReport) -> Int32 {
        StopSignal.install()
        var options = request.options
        let manifest = request.manifest
        if let logFile = request.logFile, !options.dryRun {
            do {
                report.log = try RunLog(path: logFile)
            } catch {
                report.fatal("\(error) (the run goes on without it)")
            }
        }
        // Where `--summary` sends the reader for the failures it leaves unnamed.
        if let logFile = request.logFile, report.log != nil {
            report.failureListing = .logFile(logFile)
        } else {
            report.failureListing = .status(manifest: redactedURL(manifest), destination: options.destination)
        }
        report.logLine("info", "start sync \(redactedURL(manifest))" + (options.destination.map { " --dest \($0)" } ?? ""))

        var destination = options.destination
        var provenance: ManifestProvenance?
        /// The manifest's `serial` and `expires`, once it is loaded (for the metrics file).
        var versions: (serial: Int64?, expires: Int64?) = (nil, nil)
        var summary: SyncSummary?
        /// Entries the filter left out (``PathFilter``).
        var excluded = 0
        /// Why the run ended before it had a summary.
        var ended: String?
        let result: RunMetrics.Result
        let code: Int32
        do {
            let clockStart = monotonicSeconds()
            // The key is read first: a wrong --trust file is a usage error (64), whatever the manifest.
            let trusted = request.trustKeys.isEmpty ? nil
                : ManifestTrust(keys: try TrustedKey.load(paths: request.trustKeys), signaturePath: request.signature)
            let keyring = try request.keyring.map(OpenPGPKeyring.load(path:))
            if let seconds = request.jitter, seconds > 0 {
                // Never sleep past the deadline: the run then stops at once with "deadline passed".
                let delay = min(Jitter.draw(upTo: seconds), options.deadline ?? .infinity)
                guard Jitter.sleep(delay) else { throw SyncCommandStop.interruptedDuringJitter }
            }
            // A dry run reads DEST (read-only: nothing is created or locked) while the manifest is
            // parsed; the two are independent when --dest names DEST.
            let dryRunDisk = options.dryRun ? options.destination.map { dest in
                Background { Result { try ReadOnlyDestination.open(dest) } }
            } : nil
            // A run takes DEST's lock and reads its journal meanwhile (EarlyPlace), for a local
            // manifest: a signed or fetched one is checked whole before DEST is touched.
            let readsAhead = trusted == nil && keyring == nil && !RemoteManifest.isURL(manifest)
            let early = readsAhead && !options.dryRun ? options.destination.flatMap { EarlyPlace.open($0, atomic: options.atomic) } : nil
            defer { early?.abandon() }
            // Both plan against what they read while the entries are read (PlanLookAhead).
            // (Not with a filter: the look-ahead marks entries by their place in the whole manifest.)
            let lookAhead = readsAhead && options.filter == nil
                ? dryRunDisk.map { PlanLookAhead(disk: $0) } ?? early.map { PlanLookAhead(planner: $0.planner) } : nil
            defer { _ = lookAhead?.finish() }
            // With --trust, nothing is requested (but the manifest) or changed on disk before the
            // signature verifies.
            let localStatus = RemoteManifest.isURL(manifest) ? nil : ManifestWatch.status(ofFile: manifest)
            var (loaded, origin) = try loadManifest(manifest, options: &options, report: report, trust: trusted, keyring: keyring,
                                                    digest: request.json || request.metricsFile != nil, lookAhead: lookAhead)
            provenance = origin
            versions = (loaded.serial, loaded.expires?.seconds)
            if let filter = options.filter {
                (loaded, excluded) = select(loaded, filter, report: report)
            }
            // --deadline counts from the start of the command, jitter and manifest fetch included,
            // so that an hourly cron job with --jitter 10m --deadline 50m never overlaps the next.
            if let limit = options.deadline { options.deadline = max(0.001, limit - (monotonicSeconds() - clockStart)) }
            let destPath = Result { try SyncRunner.destinationPath(manifest: loaded, options: options) }
            destination = try? destPath.get()
            var done: SyncSummary
            if options.dryRun {
                // DEST as read while the manifest was parsed, when --dest named it.
                let ahead = destination == options.destination
                done = try DryRun.run(manifest: loaded, options: options, report: report, destPath: try destPath.get(),
                                      disk: ahead ? dryRunDisk : nil, lookAhead: ahead ? lookAhead : nil)
            } else {
                let runner = SyncRunner(manifest: loaded, options: options, report: report)
                runner.early = early
                runner.knownUpToDate = lookAhead?.finish()
                runner.origin.source = provenance?.source
                // A local manifest is hashed only when an atomic run asks (a hold to check, a
                // generation to record), once: most runs never need it.
                let known = provenance?.sha256
                var hashed: String?? = nil
                runner.origin.digest = {
                    if let known { return known }
                    if hashed == nil { hashed = .some(ManifestProvenance.ofFile(manifest)?.sha256) }
                    return hashed ?? nil
                }
                if let read = localStatus.map(ManifestWatch.Read.file)
                    ?? provenance?.sha256.map({ ManifestWatch.Read.fetched(sha256: $0, etag: provenance?.etag) }) {
                    runner.origin.watch = ManifestWatch(location: manifest, read: read, settings: options.transfer)
                }
                done = try runner.run()
            }
            done.manifest = provenance
            done.excluded = excluded
            report.finish(done)
            summary = done
            code = ExitStatus.code(for: done.result)
            switch done.result {
            case .ok: result = .ok
            case .failed: result = .failed
            case .incomplete: result = .incomplete
            }
        } catch let stopped as SyncStopped {
            // The run planned and did part of its work: the error first, then what it did (the
            // summary line, the bytes for the metrics, a whole `--json` document with the reason).
            report.fatal(stopped.description)
            var done = stopped.summary
            done.manifest = provenance
            done.excluded = excluded
            summary = done
            ended = stopped.description
            code = stopped.exitStatus
            result = runResult(for: stopped.cause)
            report.finish(done, stoppedBy: stopped.description, result: result.rawValue, exitCode: code)
        } catch let error as ExitCoded {
            report.fatal(error.description)
            ended = error.description
            code = error.exitStatus
            result = runResult(for: error)
            // status must show it too, not the last run that synced (EarlyRunRecord).
            if case .notFound? = error as? RemoteManifest.Failure, !options.dryRun, let dest = options.destination {
                EarlyRunRecord.append(destination: dest, start: request.started, result: "failed", reason: error.description)
            }
        } catch {
            report.fatal("\(error)")
            ended = "\(error)"
            (result, code) = (.error, ExitStatus.entriesFailed)
        }
        report.progress?.erase()
        if request.json, summary == nil, let ended {
            var document = SyncDocument.earlyEnd(ended, temporary: code == ExitStatus.tryLater, exitCode: code)
            document.manifest = provenance.map { ManifestDocument($0, now: currentUnixTime()) }
            print(JSONOutput.render(document))
        }
        if !options.dryRun {
            if result != .ok && summary == nil { report.logLine("error", "end result=\(result.rawValue), exit \(code)") }
            if let metricsFile = request.metricsFile {
                // The `dest` label is DEST's absolute path, however the command line spelled it, so
                // that one DEST is one series (``DestinationIdentity``).
                let absolute = destination.map { (try? DestinationIdentity.resolve($0).path) ?? $0 }
                var metrics = RunMetrics(manifest: manifest, destination: absolute, start: request.started, end: currentUnixTime(),
                                         result: result, exitCode: code, summary: summary, provenance: provenance)
                metrics.manifestSerial = versions.serial
                metrics.manifestExpires = versions.expires
                do {
                    try MetricsFile.write(metrics, to: metricsFile)
                } catch {
                    report.fatal("cannot write the metrics file: \(error)")
                }
            }
        }
        report.log?.close()
        return code
    }

    /// What the metrics file says of a run that `error` ended before it had a summary.
    private static func runResult(for error: ExitCoded) -> RunMetrics.Result {
        switch error {
        case is ManifestError, is SignatureError, is OpenPGPError: return .invalidManifest
        case let error as PublishedListError: return error.isTransient ? .unreachable : .invalidManifest
        case let error as SyncError:
            switch error {
            case .manifest, .manifestRefused: return .invalidManifest
            case .locked: return .locked
            case .destination, .noSpace: return .unwritable
            case .noDestination, .setup: return .error
            case .conversionRefused, .conversionOfNested: return .failed
            }
        case let failure as RemoteManifest.Failure:
            switch failure {
            case .unreachable: return .unreachable
            case .interrupted: return .incomplete
            case .cache: return .unwritable
            case .noKeptCopy: return .invalidManifest
            case .notFound: return .manifestNotFound
            }
        case is SyncCommandStop: return .incomplete
        default: return .error
        }
    }

    /// The entries `filter` selects, and how many it left out; a rule that matched no entry is
    /// a warning (a typo in a pattern would otherwise go unnoticed while the machine syncs
    /// everything, or nothing).
    public static func select(_ manifest: Manifest, _ filter: PathFilter, report: ConsoleReport) -> (Manifest, Int) {
        let selection = filter.select(manifest)
        for rule in selection.matchedNothing {
            report.warning("\(rule.description) matches no entry of \(redactedURL(manifest.sourceName))")
        }
        return (selection.manifest, selection.leftOut)
    }

    /// The manifest from its path, or from its URL with the last good copy as fallback. A manifest
    /// taken from the kept copy loses the right to name `file:` URLs
    /// (``RequestSecurity/manifestIsLocal``): only one read now from the local disk, as the
    /// command line named it, has it.
    private static func loadManifest(_ manifest: String, options: inout SyncOptions, report: ConsoleReport,
                                     trust: ManifestTrust?, keyring: OpenPGPKeyring?, digest: Bool,
                                     lookAhead: PlanLookAhead? = nil) throws -> (Manifest, ManifestProvenance?) {
        guard RemoteManifest.isURL(manifest), let dest = options.destination else {
            let loaded: Manifest
            if let prepared = try PublishedList.prepareLocal(manifest, trusted: trust != nil, keyring: keyring) {
                loaded = try RemoteManifest.parse(prepared, sourceName: manifest)
                // A list whose signature was checked is held to the newest this DEST accepted (RunPlace).
                if keyring != nil, let signed = loaded.signedListSHA256 { options.signedManifestSHA256 = signed }
            } else if let trust {
                let verified = try ManifestLoader.loadVerified(path: manifest, trust: trust)
                loaded = verified.manifest
                options.signedManifestSHA256 = verified.sha256
            } else if let lookAhead {
                loaded = try ManifestLoader.load(path: manifest) { lookAhead.offer($0, $1) }
            } else {
                loaded = try ManifestLoader.load(path: manifest)
            }
            return (loaded, ManifestProvenance.ofFile(manifest, digest: digest))
        }
        // The kept copy lives in DEST: a file there is the first thing to say, not a failure to
        // keep it (Destination.openExisting says so, as it does for the run itself).
        do { _ = try Destination.openExisting(dest) } catch let error as SystemError { throw SyncError.destination(error) }
        // A signed manifest DEST would refuse (an older serial, past its expires) is refused before
        // it replaces the last good copy; the run checks again, and records, under DEST's lock.
        let refuseOlder: (Manifest, String) throws -> Void = { fetched, sha256 in
            let state = try? Destination.openExisting(dest)?.stateFolder(create: false)
            try SerialGate.admit(fetched, sha256: sha256, state: state ?? nil, record: false)
        }
        let admit = trust == nil ? nil : refuseOlder
        // A list signed before the one DEST accepted is refused as soon as its signature is checked:
        // before its sizes are asked, and before it replaces the last good copy.
        let admitSigned: ((KeptPublishedCopy.Signed) throws -> Void)? = keyring == nil ? nil : { signed in
            var probe = Manifest(sourceName: redactedURL(manifest), entries: [], serial: signed.signedAt)
            probe.signedListSHA256 = signed.sha256
            try refuseOlder(probe, signed.sha256)
        }
        // --trust checks YAML manifests, --keyring the lists and Metalink files (PublishedList).
        let check = trust.map { ManifestTrust.remoteCheck($0, url: manifest) }
        let settings = options.transfer
        let fetched = try RemoteManifest.load(
            url: manifest, destination: dest, settings: settings, saveCopy: !options.dryRun,
            verify: check.map { check in { bytes, signature in if !PublishedList.isPublished(bytes) { try check(bytes, signature) } } },
            verifyCopy: KeptPublishedCopy.check(trust: check, keyring: keyring, name: redactedURL(manifest)),
            admit: admit,
            prepare: { try PublishedList.prepare($0, place: .remote(url: manifest, settings: settings), trusted: trust != nil,
                                                 keyring: keyring, admit: admitSigned) })
        for warning in fetched.warnings { report.warning(warning) }
        // The bytes parsed are the bytes whose signature verified (fetched, or the kept copy).
        if keyring != nil, let signed = fetched.manifest.signedListSHA256 {
            options.signedManifestSHA256 = signed
        } else if trust != nil {
            guard let sha256 = fetched.provenance.sha256 else {
                throw ManifestError(file: redactedURL(manifest), message: "refused: the verified manifest's digest is unknown")
            }
            options.signedManifestSHA256 = sha256
        }
        let name = redactedURL(manifest)
        if !fetched.isReadNow {
            options.transfer.security.manifestIsLocal = false
            if let url = RemoteManifest.fileURL(in: fetched.manifest) {
                report.warning("\(name): the last good copy names \(redactedURL(url)); file: URLs are not read from it, "
                    + "only from a manifest read now from the local disk")
            }
        }
        switch fetched.origin {
        case .fetched: report.logLine("info", "manifest \(name) fetched")
        case .notModified:
            report.logLine("info", "manifest \(name) not modified since the last fetch; using the last good copy kept in "
                + "\(dest)/.mirror/manifest (its sha256 and owner checked)")
        case .lastGoodCopy(let why):
            let now = currentUnixTime()
            if options.dryRun || SavedCopyNotice.isDue(lastNoted: fetched.lastNoted, now: now) {
                report.warning(why + SavedCopyNotice.remark)
                if !options.dryRun { RemoteManifest.recordNotice(destination: dest, at: now) }
            } else {
                report.logLine("warning", why)
            }
        }
        return (fetched.manifest, fetched.provenance)
    }
}

/// Ends a run before it started its work.
public enum SyncCommandStop: Error, CustomStringConvertible {
    case interruptedDuringJitter

    public var description: String {
        switch self {
        case .interruptedDuringJitter: return "interrupted during the --jitter delay; nothing was done"
        }
    }
}
