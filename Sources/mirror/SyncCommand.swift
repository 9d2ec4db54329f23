import ArgumentParser
import MirrorCore
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

struct Sync: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a folder hold the manifest's files, verified (with --delete: exactly those).",
        discussion: """
            Compares the manifest with the destination and the journal in DEST/.mirror, resumes \
            partial downloads with HTTP range requests, checks every byte against the manifest's \
            checksums and renames each verified file into place (a new file of at most 1 MiB \
            has no name until then and is linked, so a kill during it leaves nothing). Files the \
            manifest does not name are left alone, unless --delete is given: then, once every \
            listed file is verified, the files an earlier run installed that the manifest no \
            longer lists are deleted, with the folders this empties; a file changed since \
            mirror installed it is kept, with a warning. \
            --delete-unlisted deletes everything else in DEST too (not .mirror), for a folder only \
            mirror writes. Nothing is deleted for a manifest with no files, or when more files \
            would go than --max-delete allows (default 50% of the files mirror knows): then the \
            run deletes nothing and exits 1.

            With --atomic, the set is built beside DEST (DEST.generations/) and DEST, a symlink, \
            is switched to it in one rename once every file verified: a program that opens DEST \
            once sees the old set or the new one, never a mix; `mirror rollback` goes back. \
            Before the first request, a set that cannot fit on DEST's file system stops the run \
            (exit 73). A file renamed in the manifest or listed twice is copied from the \
            verified copy in DEST, and --seed DIR offers more files to copy; every copy is \
            verified like a download.

            --include, --exclude and --filter-from choose the entries this machine syncs \
            (rsync's patterns; the last rule that matches a path decides, and a path no rule \
            matches gets the opposite of the first rule): a path left out is neither fetched nor \
            deleted, unless --delete-excluded deletes what mirror installed there. `mirror \
            status` and `mirror verify` take the same options. --dry-run --itemize prints the \
            plan as one line per change: ACTION REASON BYTES SOURCE PATH.

            Without a terminal, prints nothing unless a file changed or failed; on a terminal, \
            shows the files in flight and the total (bytes, rate, ETA).

            MANIFEST may be an https://, http:// or file:// URL (then --dest is required): it is \
            fetched conditionally (ETag, Last-Modified) and the last good copy is kept in \
            DEST/.mirror/manifest; when the server cannot be reached the run uses that copy and \
            says so on standard error (at most once a day; every run in --json, --metrics-file, \
            the log and `mirror status`), and exits 75 when there is none. The copy is used only \
            while it is the one this user kept; any other is discarded and fetched again.

            DEST/.mirror must belong to the user who runs mirror and be writable by nobody else \
            (exit 73 otherwise, with the fix): what is in it is trusted only that far.

            Exit codes: 0 every file verified; 1 some files failed; 64 usage; 65 invalid \
            manifest or signature; 66 manifest file cannot be read; 73 the destination cannot be \
            written; 75 try again later \
            (stopped by --deadline or a signal, a server that cannot be reached, the lock held).

            Many machines on one uplink: --prefer BASE_URL asks a site cache or a neighbour \
            first, at BASE_URL + each file's path; the manifest's sources follow on a 404 or wrong \
            bytes. After a checksum mismatch the next attempt at that URL sends Cache-Control: \
            no-cache and Pragma: no-cache, so a cache fetches the file anew. The environment's \
            http_proxy, https_proxy and no_proxy are honoured (docs/fleet.md).

            For cron and monitoring: --jitter spreads the start of many machines, --limit-rate \
            caps the bandwidth (or follows a timetable by local time), --deadline bounds the \
            run, --metrics-file feeds node_exporter's textfile collector, --log-file keeps a \
            timestamped history.

            A DURATION is numbers with units ms, s, m, h or d: 90s, 45m, 2h, 1h30m; a number \
            without a unit is refused (only 0 needs none). A SIZE or RATE is a number of bytes \
            with an optional unit K, M, G or T, powers of 1024: 64M, 1.5G, 500K.
            """
    )

    @Argument(help: "The manifest (YAML, optionally gzip-compressed): a path, or an https://, http:// or file:// URL.")
    var manifest: String

    @Option(name: .long, help: ArgumentHelp("Destination folder; overrides the manifest's `destination`.", valueName: "DIR"))
    var dest: String?

    @OptionGroup var selection: SelectionOptions

    @Option(name: .long, help: "Files in flight: over HTTP/2 they are streams on one or two connections per transfer thread, over HTTP/1.1 they take turns on --connections.")
    var jobs: Int = ConnectionPolicy.defaultFilesInFlight

    @Option(name: .long, help: "Connections to one host at most, all transfer threads together (1-256).")
    var connections: Int = ConnectionPolicy.defaultConnections

    @Option(name: .long, help: "Connections for one large file, at most, each its own HTTP/1.1 connection: it starts on one and adds more while the hash waits for bytes, the transfer thread waits for the network and the run has fewer requests than this (1: never split).")
    var segments: Int = ConnectionPolicy.defaultSegments

    @Option(name: .long, help: "Threads that drive transfers, each with its own connections and a share of the files (default: one per two cores, at most --jobs; always 1 with --limit-rate).")
    var transferThreads: Int?

    // Sizes, durations and rates are parsed here, once, by their types (ArgumentValues.swift); the
    // help states the defaults itself because an option with a `transform` does not.
    @Option(name: .long, help: ArgumentHelp("Files at least this large are downloaded in segments (64M, 1.5G). (default: \(Sync.defaultSegmentsAbove))", valueName: "SIZE"),
            transform: ByteCount.parse)
    var segmentsAbove = Sync.defaultSegmentsAbove

    @Option(name: .long, help: ArgumentHelp("Stop cleanly after this long (45m, 2h, 1h30m), state saved; exit 75.", valueName: "DURATION"),
            transform: TimeSpan.parse)
    var deadline: TimeSpan?

    @Option(name: .long, help: ArgumentHelp("Abort a transfer that stays below 1 KiB/s this long (at least \(Sync.minimumStallTimeout)), then retry. (default: \(Sync.defaultStallTimeout))", valueName: "DURATION"),
            transform: { try TimeSpan(parsing: $0, atLeast: Sync.minimumStallTimeout) })
    var stallTimeout = Sync.defaultStallTimeout

    @Option(name: .long, help: "Retries of a source after failures that made no progress, before the next source.")
    var retries: Int = 5

    @Flag(name: .long, help: "Print the plan; change nothing and send no download request.")
    var dryRun = false

    @Flag(name: .long, help: "With --dry-run: one line per change as ACTION REASON BYTES SOURCE PATH, for scripts and review.")
    var itemize = false

    @Flag(name: .long, help: "Once every listed file is verified, delete the files an earlier run installed that the manifest no longer lists.")
    var delete = false

    @Flag(name: .long, help: "Like --delete, and also delete what mirror never installed: everything in DEST the manifest does not list, but .mirror.")
    var deleteUnlisted = false

    @Flag(name: .long, help: "Also delete the files mirror installed at paths --include/--exclude leave out (implies --delete).")
    var deleteExcluded = false

    @Option(name: .long, help: ArgumentHelp("Delete nothing if more files than this would go: a count (100) or a share of the files mirror knows in DEST (10%). (default: \(DeleteLimit.default))", valueName: "N|N%"),
            transform: DeleteLimit.parse)
    var maxDelete: DeleteLimit?

    @Option(name: .long, help: ArgumentHelp("A folder whose files may hold entries' bytes (a USB disk, an old tree); a file of the right size is hashed and, if it matches, copied instead of downloaded. Repeatable.", valueName: "DIR"))
    var seed: [String] = []

    @Flag(name: .long, help: "Publish the set whole: build it as a new generation beside DEST and switch DEST (a symlink) to it once every file verified.")
    var atomic = false

    @Option(name: .long, help: "Complete generations kept with --atomic (at least 1), for `mirror rollback`.")
    var keep: Int = 2

    @Flag(name: .long, help: "Wait for another run on the same destination to finish instead of exiting 75; SIGINT or SIGTERM end the wait (exit 75).")
    var wait = false

    @Option(name: .long, help: ArgumentHelp("Ask BASE_URL + each file's path first (a site cache, a neighbour); the manifest's sources follow on a 404 or wrong bytes. Repeatable.", valueName: "BASE_URL"),
            transform: SourceOrder.parseBase)
    var prefer: [String] = []

    @Option(name: .long, help: ArgumentHelp("Trust this CA (PEM) in addition to the system's, for lab servers. TLS verification is always on.", valueName: "PEM"))
    var caFile: String?

    @Option(name: .long, help: ArgumentHelp("Credentials by host (netrc format), for the origins the manifest names (`default`: the manifest URL's only); never to a --prefer source, nor after a redirect to another origin.", valueName: "PATH"))
    var netrcFile: String?

    @Option(name: .long, help: ArgumentHelp("Send `Authorization: <value of VAR>` to the manifest's sources (never after a redirect to another host).", valueName: "VAR"))
    var authHeaderEnv: String?

    @Flag(name: .long, help: "Print errors only.")
    var quiet = false

    @Flag(name: .long, help: "Print the summary line (when a file changed or failed, or the run stopped) and the errors, not a line per file: for cron mail.")
    var summary = false

    @Flag(name: .long, help: "Print one JSON summary on standard output at the end.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Cap the download rate of the whole run, in bytes per second (500K, 20M), or by local time of day with a timetable in rclone's --bwlimit form: \"08:00,2M 18:00,20M 23:00,off\" (entries [DAY-]HH:MM,RATE; Mon-08:00 for one day; off: no cap). The cap changes as the run crosses a time, without restarting transfers.", valueName: "RATE"),
            transform: RateSchedule.parse)
    var limitRate: RateSchedule?

    @Option(name: .long, help: ArgumentHelp("Wait a random time in [0, DURATION) before starting (10m), so machines spread out.", valueName: "DURATION"),
            transform: TimeSpan.parse)
    var jitter: TimeSpan?

    @Option(name: .long, help: ArgumentHelp("Write the run's outcome in Prometheus textfile format to PATH, atomically.", valueName: "PATH"))
    var metricsFile: String?

    @Option(name: .long, help: ArgumentHelp("Append timestamped lines (start, each changed or failed file, summary) to PATH.", valueName: "PATH"))
    var logFile: String?

    @Option(name: .long, help: ArgumentHelp("Use the manifest only if its signature verifies with this Ed25519 public key (PEM), or with any key of this folder; repeat to trust several (a key rotation). Holds DEST to the manifest's serial and expires.", valueName: "PUB.pem"))
    var trust: [String] = []

    @Option(name: .long, help: ArgumentHelp("The manifest's signature file (default: MANIFEST.sig); needs --trust.", valueName: "PATH"))
    var signature: String?

    @Option(name: .long, help: ArgumentHelp("Use a checksum list (SHA256SUMS) or Metalink file only if its OpenPGP signature (LIST.gpg, .sign, .asc, or clearsigned) verifies with a key of this keyring, checked by gpgv.", valueName: "KEYRING.gpg"))
    var keyring: String?

    /// The defaults of SyncOptions and TransferSettings, as the options show them.
    static let defaultSegmentsAbove = ByteCount(bytes: SyncOptions(manifestPath: "").segmentThreshold)
    static let defaultStallTimeout = TimeSpan(seconds: Double(TransferSettings().stallTimeout))
    /// libcurl counts the low-speed time in whole seconds; below one, every transfer would abort.
    static let minimumStallTimeout = TimeSpan(seconds: 1)

    func validate() throws {
        guard ParseOrder.checksMeaning else { return }
        if signature != nil && trust.isEmpty { throw ValidationError("--signature needs --trust PUB.pem") }
        guard jobs >= 1 && jobs <= 256 else { throw ValidationError("--jobs must be between 1 and 256") }
        guard connections >= 1 && connections <= 256 else { throw ValidationError("--connections must be between 1 and 256") }
        guard segments >= 1 && segments <= 16 else { throw ValidationError("--segments must be between 1 and 16") }
        if let transferThreads, transferThreads < 1 || transferThreads > 64 {
            throw ValidationError("--transfer-threads must be between 1 and 64")
        }
        guard retries >= 0 && retries <= 100 else { throw ValidationError("--retries must be between 0 and 100") }
        for folder in seed {
            var st = stat()
            guard stat(folder, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
                throw ValidationError("--seed \(folder): not a folder this user can read")
            }
        }
        guard keep >= 1 && keep <= 1000 else { throw ValidationError("--keep must be between 1 and 1000") }
        if maxDelete != nil && !delete && !deleteUnlisted && !deleteExcluded && !atomic {
            throw ValidationError("--max-delete limits --delete, --delete-unlisted or --atomic; add one of them")
        }
        if itemize && !dryRun { throw ValidationError("--itemize describes the plan of --dry-run; add --dry-run") }
        if deleteExcluded && selection.isEmpty {
            throw ValidationError("--delete-excluded deletes what --include, --exclude or --filter-from leave out; add one of them")
        }
        if let caFile, access(caFile, R_OK) != 0 {
            throw ValidationError("--ca-file \(caFile): cannot read it: \(String(cString: strerror(errno)))")
        }
        if let netrcFile {
            do { _ = try Netrc.load(path: netrcFile) } catch { throw ValidationError("\(error)") }
        }
        if let authHeaderEnv {
            do { _ = try RequestSecurity.authorization(fromEnvironment: authHeaderEnv) } catch { throw ValidationError("\(error)") }
        }
        if RemoteManifest.isURL(manifest) && dest == nil {
            throw ValidationError("a manifest URL needs --dest DIR: the last good copy of the manifest is kept in DIR/.mirror/manifest")
        }
    }

    func run() throws {
        let started = currentUnixTime()
        let report = ConsoleReport(mode: json ? .json : quiet ? .quiet : summary ? .summary : .text)
        if !json && !quiet && !dryRun && ProgressDisplay.wanted() { report.progress = ProgressDisplay() }
        var options = SyncOptions(manifestPath: manifest)
        options.destination = dest
        options.jobs = jobs
        options.connections = connections
        options.segments = segments
        options.transferThreads = transferThreads
        options.segmentThreshold = segmentsAbove.bytes
        options.dryRun = dryRun
        options.itemize = itemize
        options.deletion = deleteUnlisted ? .unlisted : delete || deleteExcluded ? .installed : nil
        options.filter = try selection.filterOrExit()
        options.deleteExcluded = deleteExcluded
        if let maxDelete { options.deletionPolicy = DeletionPolicy(limit: maxDelete) }
        options.atomic = atomic
        options.seeds = seed
        options.keepGenerations = keep
        options.waitForLock = wait
        options.retries = retries
        options.deadline = deadline?.seconds
        options.limitRate = limitRate.flatMap { $0.isUnlimited ? nil : $0 }
        options.transfer.stallTimeout = Int(stallTimeout.seconds)
        options.sourceOrder = SourceOrder(preferred: prefer)
        options.transfer.security.caFile = caFile
        options.transfer.security.netrc = try netrcFile.map(Netrc.load(path:))
        options.transfer.security.authorization = try authHeaderEnv.map(RequestSecurity.authorization(fromEnvironment:))
        // A path or a file: URL on the command line is read from the local disk, so its entries may
        // use file: URLs; SyncSession takes that right back when the manifest comes from the kept copy.
        let lowered = manifest.lowercased()
        options.transfer.security.manifestIsLocal = !(lowered.hasPrefix("http://") || lowered.hasPrefix("https://"))
        // A netrc `default` entry goes to the manifest URL's origin only (CredentialScope).
        options.transfer.security.credentialScope = CredentialScope(manifestURL: options.transfer.security.manifestIsLocal ? nil : manifest)
        if let rate = options.limitRate?.lowestRate {
            // A transfer held below the stall threshold by --limit-rate itself is not stalled.
            options.transfer.lowSpeedLimit = Int(max(1, min(Int64(options.transfer.lowSpeedLimit), rate / Int64(jobs) / 2)))
        }
        let request = SyncRequest(manifest: manifest, options: options,
                                  jitter: jitter?.seconds,
                                  trustKeys: trust, signature: signature, metricsFile: metricsFile, logFile: logFile,
                                  json: json, started: started, keyring: keyring)
        throw ExitCode(SyncSession.run(request, report: report))
    }
}
