#if canImport(Glibc)
import Glibc
#endif

/// Prints a run for people and for cron (docs/cli.md, "Output").
///
/// Not on a terminal: one line per file that changed or failed, then a summary line, and nothing at
/// all when nothing changed and nothing failed, so cron mails only when there is news. On a
/// terminal the summary is always printed. `--quiet`: errors only. `--json`: one JSON object on
/// standard output at the end. Errors go to standard error in every mode.
public final class ConsoleReport {
    public enum Mode: Sendable { case text, quiet, json }

    let mode: Mode
    let isTerminal: Bool
    /// The live progress block (terminal, text mode only); see ``ProgressDisplay``.
    public var progress: ProgressDisplay?
    /// `--log-file`: every changed or failed file and the summary, timestamped.
    public var log: RunLog?

    public init(mode: Mode, isTerminal: Bool = isatty(STDOUT_FILENO) == 1) {
        self.mode = mode
        self.isTerminal = isTerminal
    }

    /// Called as each entry changes or fails.
    public func entryFinished(_ result: EntryResult) {
        switch result.outcome {
        case .failed(let message):
            logLine("failed", "\(result.path): \(message)")
            printError("\(result.path): \(message)")
        case .downloaded, .replaced:
            let verb = result.outcome == .replaced ? "replaced" : "downloaded"
            logLine("info", "\(verb) \(result.path) (\(result.size) bytes)" + (result.source.map { " from \($0)" } ?? ""))
            guard mode == .text else { return }
            let from = result.fromMirror ? " from \(result.source ?? "a mirror")" : ""
            printOut("\(verb) \(result.path) (\(Formatting.bytes(result.size)))\(from)")
        }
    }

    /// A remark that also matters in `--quiet` and `--json` runs (a manifest taken from the last
    /// good copy because the server was unreachable): standard error, and the log.
    public func warning(_ text: String) {
        logLine("warning", text)
        printError(text)
    }

    /// Appends to `--log-file`, if any; a failed write is reported once and the run goes on.
    public func logLine(_ level: String, _ message: String) {
        guard let log, let error = log.write(level, message) else { return }
        printError("\(error) (the log file is not written for the rest of this run)")
    }

    /// A remark worth a line (a recovered journal, a dry-run plan line).
    public func notice(_ text: String) {
        if mode == .text { printOut(text) }
    }

    public func finish(_ summary: SyncSummary) {
        progress?.erase()
        progress = nil
        logLine(summary.result == .ok ? "info" : summary.result == .failed ? "failed" : "warning",
                "end result=\(summary.result.name): " + ConsoleReport.summaryLine(summary).dropFirst("mirror: ".count))
        switch mode {
        case .json:
            progress?.erase()
            fputs(JSONReport.render(summary) + "\n", stdout)  // already masked and escaped (RFC 8259 §7)
            fflush(stdout)
        case .quiet:
            break
        case .text:
            let news = summary.changed > 0 || summary.failed > 0 || summary.result != .ok
            if news || isTerminal { printOut(ConsoleReport.summaryLine(summary)) }
        }
    }

    /// `mirror: 3 downloaded (1.0 GiB), 1 failed, 198 up to date, 12.3 s`.
    public static func summaryLine(_ s: SyncSummary) -> String {
        var parts: [String] = []
        if s.downloaded > 0 { parts.append("\(s.downloaded) downloaded") }
        if s.replaced > 0 { parts.append("\(s.replaced) replaced") }
        if s.failed > 0 { parts.append("\(s.failed) failed") }
        if s.pending > 0 { parts.append("\(s.pending) not finished") }
        let current = s.upToDate + s.checked
        if current > 0 { parts.append("\(current) up to date") }
        if parts.isEmpty { parts.append("no files") }
        var line = "mirror: " + parts.joined(separator: ", ")
        if s.bytesTransferred > 0 { line += "; \(Formatting.bytes(s.bytesTransferred)) transferred" }
        line += " in \(Formatting.duration(s.seconds))"
        if case .incomplete(let why) = s.result { line += " (stopped: \(why); a rerun continues)" }
        return line
    }

    /// Standard output. Every line printed goes through ``Formatting/forPeople(_:)`` (credentials
    /// masked, terminal controls escaped), whatever built it.
    func printOut(_ line: String) {
        progress?.erase()
        fputs(Formatting.forPeople(line) + "\n", stdout)
        fflush(stdout)
    }

    /// Standard error, as `mirror: line`, masked like ``printOut(_:)``.
    func printError(_ line: String) {
        progress?.erase()
        fflush(stdout)
        fputs("mirror: " + Formatting.forPeople(line) + "\n", stderr)
    }
}

/// The `--json` summary: `{"result", "files": {...}, "bytes_transferred", "failures": [...]}` and more.
///
/// Messages (`reason`, `error`) are masked with ``redactingURLs(in:)``; `source` is masked where it
/// is made (``redactedURL(_:)``), and paths are left as they are (a path is data, not prose).
public enum JSONReport {
    public static func render(_ s: SyncSummary) -> String {
        var out = "{"
        out += "\"result\":\(quote(s.result.name))"
        if case .incomplete(let why) = s.result { out += ",\"reason\":\(quote(redactingURLs(in: why)))" }
        out += ",\"files\":{\"total\":\(s.total),\"up_to_date\":\(s.upToDate + s.checked),\"checked\":\(s.checked)"
        out += ",\"downloaded\":\(s.downloaded),\"replaced\":\(s.replaced),\"failed\":\(s.failed),\"pending\":\(s.pending)}"
        out += ",\"bytes_transferred\":\(s.bytesTransferred)"
        out += ",\"seconds\":\((s.seconds * 1000).rounded() / 1000)"
        let changed = s.results.filter { $0.outcome == .downloaded || $0.outcome == .replaced }
        out += ",\"changed\":[" + changed.map { r in
            "{\"path\":\(quote(r.path)),\"action\":\(quote(r.outcome == .replaced ? "replaced" : "downloaded")),\"size\":\(r.size),\"source\":\(r.source.map(quote) ?? "null")}"
        }.joined(separator: ",") + "]"
        out += ",\"failures\":[" + s.failures.map { r in
            guard case .failed(let message) = r.outcome else { return "" }
            return "{\"path\":\(quote(r.path)),\"error\":\(quote(redactingURLs(in: message)))}"
        }.joined(separator: ",") + "]"
        if !s.plan.isEmpty { out += ",\"plan\":[" + s.plan.map(quote).joined(separator: ",") + "]" }
        return out + "}"
    }

    /// `--json` for a run that ended before it could plan (invalid or unreachable manifest, lock
    /// held, destination unwritable): the same shape with zero counts, `result` "incomplete" when a
    /// rerun may succeed (exit 75) else "failed", the message in `reason`, and the exit code.
    public static func renderEarlyEnd(_ message: String, temporary: Bool, exitCode: Int32) -> String {
        var s = SyncSummary()
        s.result = temporary ? .incomplete(message) : .failed
        var out = render(s)
        out.removeLast()
        if !temporary { out += ",\"reason\":\(quote(redactingURLs(in: message)))" }
        return out + ",\"exit_code\":\(exitCode)}"
    }

    /// A JSON string literal (RFC 8259 §7), with every control escaped as `\uXXXX`.
    static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                // RFC 8259 §7 requires C0; what else Formatting.printable escapes (DEL, C1, line
                // separators, bidi controls) is escaped too, for a consumer that prints a string to a terminal.
                if Formatting.needsEscape(scalar) {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}

extension ConsoleReport {
    /// An error that ends the run before any entry result (invalid manifest, lock held, disk).
    public func fatal(_ message: String) {
        logLine("error", message)
        printError(message)
    }
}
