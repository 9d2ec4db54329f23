import ArgumentParser
import MirrorCore
import MirrorKit

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Re-read and re-hash every file of the manifest; report the missing and corrupt ones.",
        discussion: """
            Reads every file the manifest lists under DEST in full, on every core, and compares its \
            size and checksums with the manifest. The journal is not trusted, read or changed, and \
            nothing is downloaded or repaired: run `mirror sync` to fetch what is missing or corrupt. \
            Symbolic links under DEST are reported, never followed. MANIFEST may be the URL a \
            sync fetched it from (with --dest): the copy kept in DEST/.mirror/manifest is read, \
            without the network.

            Each problem is printed on standard error with what was expected and what was found. \
            On a terminal a progress line shows while it runs. Exits 0 when every file is present \
            and intact, 1 otherwise.
            """
    )

    @OptionGroup var target: ManifestAndDestination

    @Option(name: .long, help: ArgumentHelp("Files read at once (default: one per core).", valueName: "N"))
    var jobs: Int?

    @Flag(name: .long, help: "Print problems only, no summary line.")
    var quiet = false

    @Flag(name: .long, help: "Print one JSON object on standard output instead of the text report.")
    var json = false

    func validate() throws {
        guard ParseOrder.checksMeaning else { return }
        if let jobs, jobs < 1 || jobs > 256 { throw ValidationError("--jobs must be between 1 and 256") }
    }

    func run() throws {
        let (manifest, destination, _, excluded) = try target.loadSelected()
        let runner = VerifyRunner(manifest: manifest, destinationPath: destination, threads: jobs ?? WorkerPool.coreCount)
        let progress = ProgressLine(enabled: !json && !quiet)
        var summary = runner.run(progress: progress.isEnabled ? { progress.update($0.line) } : nil)
        summary.excluded = excluded
        progress.clear()
        if json {
            print(summary.json)
        } else {
            let report = ConsoleReport(mode: .text)
            if let whole = summary.destinationProblem {
                report.fatal("\(whole) (so none of the \(summary.total) files could be checked)")
            } else {
                for problem in summary.problems { report.fatal("\(problem.path): \(problem.message)") }
            }
            if !quiet { print(summary.summaryLine) }
        }
        throw ExitCode(summary.isGood ? ExitStatus.ok : ExitStatus.entriesFailed)
    }
}
