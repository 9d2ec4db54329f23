/// Where every failed file of a run can be read, named by the "and N more" line of `--summary`
/// (docs/cli.md, "Output"): the log when the run writes one, else `mirror status`, which lists
/// each failed entry with its error from the journal.
public enum FailureListing: Sendable, Equatable {
    /// `--log-file PATH`: a line per failed file, with its message.
    case logFile(String)
    /// The `mirror status` command that reads this run's journal: its manifest and `--dest`.
    case status(manifest: String, destination: String?)

    public var words: String {
        switch self {
        case .logFile(let path):
            return "every one is in \(path)"
        case .status(let manifest, let destination):
            let dest = destination.map { " --dest " + FailureListing.shellWord($0) } ?? ""
            return "`mirror status \(FailureListing.shellWord(manifest))\(dest)` lists every one"
        }
    }

    /// `text` as one word a shell reads back unchanged: as it is when it holds only characters no
    /// shell treats specially, else in single quotes.
    static func shellWord(_ text: String) -> String {
        let plain = !text.isEmpty && text.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || scalar.properties.numericType != nil
                || "/._-+:=@%,".unicodeScalars.contains(scalar))
        }
        return plain ? text : "'" + text.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }
}

extension FailureSummaryPolicy.Decision {
    /// The lines `--summary` prints for the failures (on standard error, each then prefixed
    /// `mirror: ` like every error), e.g.
    /// `40 files failed: server answered HTTP 404 (Not Found) from https://media.example.org (a.bin, b.bin, c.bin, …)`
    /// then `and 37 more failed files: every one is in /var/log/mirror.log`.
    public func lines(listing: FailureListing) -> [String] {
        var lines = shown.map { group -> String in
            guard group.count > 1 else { return "\(group.paths.first ?? ""): \(group.firstMessage)" }
            let from = group.key.host.map { " from \($0)" } ?? ""
            let rest = group.count > group.paths.count ? ", …" : ""
            // Files whose server could not be reached did not fail on their content.
            let outcome = group.key.cause == .unreachable ? "not reached" : "failed"
            return "\(group.count) files \(outcome): \(group.key.cause.words)\(from) (\(group.paths.joined(separator: ", "))\(rest))"
        }
        if more > 0 {
            let others = moreGroups == 0 ? "" : moreGroups == 1 ? " (1 more cause or host)" : " (\(moreGroups) more causes or hosts)"
            lines.append("and \(more) more failed \(more == 1 ? "file" : "files")\(others): \(listing.words)")
        }
        return lines
    }
}
