import ArgumentParser
import MirrorCore
import MirrorKit

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Re-read and re-hash every file of the manifest; report the missing and corrupt ones.",
        discussion: """
            Reads every file the manifest lists under DEST in full, on every core, and compares its \
            size and checksums (and the manifest's mode and mtime, where it gives them) with the \
            manifest. The journal is not trusted, and nothing is downloaded or repaired: run \
            `mirror sync` to fetch what is missing or corrupt. A corrupt file the journal still \
            vouched for is forgotten by the journal (under DEST's lock, if no sync holds it), so \
            that the next sync fetches it again. \
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
        let report = ConsoleReport(mode: json ? .json : .text)
        // A corrupt file the journal still vouches for is told to the next sync (``DamageRecord``).
        var note: String?
        do {
            switch try DamageRecord.record(summary.problems, destinationPath: destination) {
            case .nothing: break
            case .recorded(let n):
                summary.recorded = n
                note = "the journal no longer vouches for \(n == 1 ? "the corrupt file" : "\(n) corrupt files"): "
                    + "the next sync fetches \(n == 1 ? "it" : "them") again"
            case .busy(let why):
                note = "\(why): the corrupt files are not recorded for the next sync; run verify again once it ends"
            }
        } catch {
            note = "cannot record the corrupt files for the next sync: \(error)"
        }
        if json {
            print(summary.json)
            if let note, summary.recorded == nil { report.warning(note) }
        } else {
            if let whole = summary.destinationProblem {
                report.fatal("\(whole) (so none of the \(summary.total) files could be checked)")
            } else {
                for problem in summary.problems { report.fatal("\(problem.path): \(problem.message)") }
            }
            if let note, summary.recorded == nil {
                report.warning(note)
            } else if let note, !quiet {
                report.notice(note)
            }
            if !quiet { print(summary.summaryLine) }
        }
        throw ExitCode(summary.isGood ? ExitStatus.ok : ExitStatus.entriesFailed)
    }
}
