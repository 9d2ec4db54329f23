import ArgumentParser
import MirrorCore

struct Sync: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a folder hold exactly the manifest's files, verified.",
        discussion: """
            Compares the manifest with the destination and the journal in DEST/.mirror, resumes \
            partial downloads with HTTP range requests, checks every byte against the manifest's \
            checksums and renames each verified file into place. Files the manifest does not name \
            are left alone. Without a terminal, prints nothing unless a file changed or failed.
            """
    )

    @Argument(help: "The manifest (YAML, optionally gzip-compressed).")
    var manifest: String

    @Option(name: .long, help: ArgumentHelp("Destination folder; overrides the manifest's `destination`.", valueName: "DIR"))
    var dest: String?

    @Option(name: .long, help: "Files transferred at once.")
    var jobs: Int = 8

    @Option(name: .long, help: ArgumentHelp("Stop cleanly after this long (45m, 2h), state saved; exit 75.", valueName: "DURATION"))
    var deadline: String?

    @Option(name: .long, help: ArgumentHelp("Abort a transfer that stays below 1 KiB/s this long, then retry.", valueName: "DURATION"))
    var stallTimeout: String = "30s"

    @Option(name: .long, help: "Retries of a source after failures that made no progress, before the next source.")
    var retries: Int = 5

    @Flag(name: .long, help: "Print the plan; change nothing and send no download request.")
    var dryRun = false

    @Flag(name: .long, help: "Wait for another run on the same destination to finish instead of exiting 75.")
    var wait = false

    @Flag(name: .long, help: "Print errors only.")
    var quiet = false

    @Flag(name: .long, help: "Print one JSON summary on standard output at the end.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Use the manifest only if its signature verifies with this Ed25519 public key (PEM).", valueName: "PUB.pem"))
    var trust: String?

    @Option(name: .long, help: ArgumentHelp("The manifest's signature file (default: MANIFEST.sig); needs --trust.", valueName: "PATH"))
    var signature: String?

    func validate() throws {
        if signature != nil && trust == nil { throw ValidationError("--signature needs --trust PUB.pem") }
        guard jobs >= 1 && jobs <= 256 else { throw ValidationError("--jobs must be between 1 and 256") }
        guard retries >= 0 && retries <= 100 else { throw ValidationError("--retries must be between 0 and 100") }
        if let deadline, Formatting.parseDuration(deadline) == nil {
            throw ValidationError("--deadline takes a duration such as 45m, 2h or 90s, got \"\(deadline)\"")
        }
        guard let stall = Formatting.parseDuration(stallTimeout), stall >= 1 else {
            throw ValidationError("--stall-timeout takes a duration of at least 1s, got \"\(stallTimeout)\"")
        }
    }

    func run() throws {
        let report = ConsoleReport(mode: json ? .json : quiet ? .quiet : .text)
        var options = SyncOptions(manifestPath: manifest)
        options.destination = dest
        options.jobs = jobs
        options.dryRun = dryRun
        options.waitForLock = wait
        options.retries = retries
        options.deadline = deadline.flatMap(Formatting.parseDuration)
        options.transfer.stallTimeout = Int(Formatting.parseDuration(stallTimeout) ?? 30)
        StopSignal.install()
        do {
            // The key is read first: a wrong --trust file is a usage error (64), whatever the manifest.
            let trusted = try trust.map { ManifestTrust(key: try TrustedKey.load(path: $0), signaturePath: signature) }
            // With --trust, nothing is requested or changed on disk before the signature verifies.
            let loaded = try trusted.map { try ManifestLoader.load(path: manifest, trust: $0) }
                ?? ManifestLoader.load(path: manifest)
            let summary = try SyncRunner(manifest: loaded, options: options, report: report).run()
            report.finish(summary)
            throw ExitCode(ExitStatus.code(for: summary.result))
        } catch let error as ManifestError {
            report.fatal(error.description)
            throw ExitCode(ExitStatus.invalidManifest)
        } catch let error as SignatureKeyError {
            report.fatal(error.description)
            throw ExitCode(ExitStatus.usage)
        } catch let error as SignatureError {
            report.fatal(error.description)
            throw ExitCode(ExitStatus.invalidManifest)
        } catch let error as SyncError {
            report.fatal(error.description)
            throw ExitCode(ExitStatus.code(for: error))
        }
    }
}
