import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// Prints a run for people and for cron (docs/cli.md, "Output").
///
/// Not on a terminal: one line per file that changed or failed, then a summary line, and nothing at
/// all when nothing changed and nothing failed, so cron mails only when there is news. On a
/// terminal the summary is always printed. `--summary`: that summary line alone (when there is
/// news, or on a terminal), no line per file: a first sync of 50 files mailed 55 lines; its failed
/// files are grouped by cause and host at the end, a handful of lines at most
/// (``FailureSummaryPolicy``; docs/cli.md, "Output"). `--quiet`: errors only. `--json`: one JSON
/// object on standard output at the end. Errors, failed files among them, go to standard error in
/// every mode.
public final class ConsoleReport {
    public enum Mode: Sendable { case text, summary, quiet, json }

    let mode: Mode
    let isTerminal: Bool
    /// The live progress block (terminal, text mode only); see ``ProgressDisplay``.
    public var progress: ProgressDisplay?
    /// `--log-file`: every changed or failed file and the summary, timestamped.
    public var log: RunLog?
    /// `--summary`: the failures so far, printed grouped when the run ends (``printFailures()``).
    var failures = FailureGroups(pathsKept: FailureSummaryPolicy().pathsPerLine)
    /// Where the "and N more" line of `--summary` sends the reader (set by ``SyncSession``).
    public var failureListing = FailureListing.status(manifest: "MANIFEST", destination: nil)

    public init(mode: Mode, isTerminal: Bool = isatty(STDOUT_FILENO) == 1) {
        self.mode = mode
        self.isTerminal = isTerminal
    }

    /// Called as each entry changes or fails.
    public func entryFinished(_ result: EntryResult) {
        switch result.outcome {
        case .failed(let message):
            logLine("failed", "\(result.path): \(message)")
            guard mode == .summary else { return printError("\(result.path): \(message)") }
            failures.add(path: result.path, cause: result.cause ?? .other, host: result.host, message: message)
        case .downloaded, .replaced:
            let verb = result.outcome == .replaced ? "replaced" : "downloaded"
            logLine("info", "\(verb) \(result.path) (\(result.size) bytes)" + (result.source.map { " from \($0)" } ?? "")
                    + (result.copiedFrom.map { " copied from \($0)" } ?? "")
                    + (result.deltaFrom.map { " (delta: \(result.reusedBytes) bytes copied from \($0))" } ?? ""))
            guard mode == .text else { return }
            if let base = result.deltaFrom {
                let fetched = Formatting.bytes(max(0, result.size - result.reusedBytes))
                printOut("\(verb) \(result.path) (\(Formatting.bytes(result.size))): \(fetched) fetched, the rest copied from \(base)")
                return
            }
            if let local = result.copiedFrom {
                printOut("\(result.outcome == .replaced ? "replaced" : "copied") \(result.path) (\(Formatting.bytes(result.size))) from \(local)")
                return
            }
            let from = result.fromMirror ? " from \(result.source ?? "a mirror")" : ""
            printOut("\(verb) \(result.path) (\(Formatting.bytes(result.size)))\(from)")
        case .deleted:
            logLine("info", "deleted \(result.path) (\(result.size) bytes)")
            guard mode == .text else { return }
            printOut("deleted \(result.path)")
        }
    }

    /// A remark that also matters in `--quiet` and `--json` runs (a manifest taken from the last
    /// good copy because the server was unreachable): standard error, and the log.
    public func warning(_ text: String) {
        logLine("warning", text)
        printError(text)
    }

    /// Appends to `--log-file`, if any; a failed write is reported once and the run goes on.
    /// The message is built only when there is a log: a run without one (the usual cron run)
    /// should not format a line per file for nobody.
    public func logLine(_ level: String, _ message: @autoclosure () -> String) {
        guard let log, let error = log.write(level, message()) else { return }
        printError("\(error) (the log file is not written for the rest of this run)")
    }

    /// A remark worth a line (a recovered journal, a dry-run plan line).
    public func notice(_ text: String) {
        if mode == .text { printOut(text) }
    }

    /// A dry run's plan line: text mode prints it; `--json` keeps it for the document's `plan`
    /// (``SyncSummary/plan``). Not flushed line by line (10^6 lines were 10^6 `write`s): the
    /// summary that follows flushes, and so does anything written to standard error first.
    func plan(_ line: String, into summary: inout SyncSummary) {
        switch mode {
        case .text:
            printOut(line, flush: false)
        case .json:
            summary.plan.append(line)
        case .quiet, .summary:
            break
        }
    }

    public func finish(_ summary: SyncSummary) {
        progress?.erase()
        progress = nil
        printFailures()
        logLine(summary.result == .ok ? "info" : summary.result == .failed ? "failed" : "warning",
                "end result=\(summary.result.name): " + ConsoleReport.summaryLine(summary).dropFirst("mirror: ".count))
        switch mode {
        case .json:
            progress?.erase()
            // Masked by SyncDocument, escaped by JSONOutput; a dry run's plan a batch at a time.
            summary.writeJSON { fputs($0, StandardStreams.output) }
            fputs("\n", StandardStreams.output)
            fflush(StandardStreams.output)
        case .quiet:
            break
        case .text where summary.dryRun != nil, .summary where summary.dryRun != nil:
            var line = summary.dryRun?.line ?? ""
            if summary.excluded > 0 { line += " (\(summary.excluded) \(summary.excluded == 1 ? "entry" : "entries") left out by the filter)" }
            printOut(line)
        case .text, .summary:
            let news = summary.changed > 0 || summary.deleted > 0 || summary.failed > 0 || summary.result != .ok || summary.published != nil
            if news || isTerminal { printOut(ConsoleReport.summaryLine(summary)) }
        }
    }

    /// The end of a run that planned and then stopped on an error (``SyncStopped``), said
    /// before this: what the run did, as ``finish(_:)`` says it, and for `--json` one whole
    /// document that also carries the reason and the exit code (docs/cli.md, "Output").
    public func finish(_ summary: SyncSummary, stoppedBy reason: String, result: String, exitCode: Int32) {
        guard mode == .json else { return finish(summary) }
        progress?.erase()
        var document = SyncDocument(summary)
        document.reason = redactingURLs(in: reason)
        document.exitCode = exitCode
        print(JSONOutput.render(document))
        logLine("error", "end result=\(result), exit \(exitCode): " + ConsoleReport.summaryLine(summary).dropFirst("mirror: ".count))
    }

    /// `mirror: 3 downloaded (1.0 GiB), 1 failed, 198 up to date, 12.3 s`.
    public static func summaryLine(_ s: SyncSummary) -> String {
        if let hold = s.hold {
            return "mirror: held at generation \(hold.generation) by a rollback; nothing changed in \(Formatting.duration(s.seconds))"
        }
        var parts: [String] = []
        if s.downloaded > 0 { parts.append("\(s.downloaded) downloaded" + (s.copied > 0 ? " (\(s.copied) copied from this machine)" : "")) }
        if s.replaced > 0 { parts.append("\(s.replaced) replaced") }
        if s.deleted > 0 { parts.append("\(s.deleted) deleted") }
        // A file whose server could not be reached did not fail on its content: said apart.
        let failedOnContent = s.failed - s.notReached
        if failedOnContent > 0 {
            parts.append("\(failedOnContent) failed" + (s.refused > 0 ? " (\(s.refused) refused before, not downloaded again)" : ""))
        }
        if s.notReached > 0 { parts.append("\(s.notReached) not reached") }
        if s.pending > 0 { parts.append("\(s.pending) not finished") }
        let current = s.upToDate + s.checked
        if current > 0 { parts.append("\(current) up to date") }
        if parts.isEmpty { parts.append("no files") }
        if s.excluded > 0 { parts.append("\(s.excluded) left out by the filter") }
        var line = "mirror: " + parts.joined(separator: ", ")
        if let published = s.published {
            line += "; generation \(published.generation) published" + (published.previous.map { " (was \($0))" } ?? "")
        }
        if s.bytesTransferred > 0 { line += "; \(Formatting.bytes(s.bytesTransferred)) transferred" }
        line += " in \(Formatting.duration(s.seconds))"
        if case .incomplete(let why) = s.result { line += " (stopped: \(why); a rerun continues)" }
        return line
    }

    /// Standard output. Every line printed goes through ``Formatting/forPeople(_:)`` (credentials
    /// masked, terminal controls escaped), whatever built it; flushed at once unless `flush` is
    /// false (a dry run's plan lines, ``plan(_:into:)``).
    func printOut(_ line: String, flush: Bool = true) {
        progress?.erase()
        fputs(Formatting.forPeople(line) + "\n", StandardStreams.output)
        if flush { fflush(StandardStreams.output) }
    }

    /// Standard error, as `mirror: line`, masked like ``printOut(_:)``.
    func printError(_ line: String) {
        progress?.erase()
        fflush(StandardStreams.output)
        fputs("mirror: " + Formatting.forPeople(line) + "\n", StandardStreams.error)
    }
}

extension ConsoleReport {
    /// An error that ends the run (invalid manifest, lock held, disk), after the failures of
    /// `--summary` so far: a run a full disk stops still names them.
    public func fatal(_ message: String) {
        printFailures()
        logLine("error", message)
        printError(message)
    }
}

extension ConsoleReport {
    /// `--summary`: the failed files so far, grouped by cause and host (``FailureSummaryPolicy``),
    /// on standard error like every error; then forgotten, so nothing is printed twice.
    public func printFailures() {
        guard !failures.isEmpty else { return }
        let decision = FailureSummaryPolicy().decide(failures)
        failures = FailureGroups(pathsKept: failures.pathsKept)
        for line in decision.lines(listing: failureListing) { printError(line) }
    }
}
