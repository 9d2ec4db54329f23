/// What `sync --dry-run` would do, in totals, after its plan lines (docs/cli.md, `--dry-run`): a plan of
/// 20,000 lines says nothing at a glance, and a script wants the numbers (`--json`: `dry_run`).
///
/// `deletions`: what `--delete`, `--delete-unlisted` or an atomic switch would remove (0 when the
/// guardrails would refuse, which the dry run says too).
public struct DryRunTotals: Codable, Equatable, Sendable {
    /// Entries that would be downloaded, replaced or resumed.
    public var files = 0
    /// Bytes that would be downloaded for them (a resume counts only what is missing).
    public var bytes: Int64 = 0
    /// Present files no sync has verified, which would be hashed (and fetched only if they differ).
    public var checks = 0
    /// Entries that cannot be placed (something else is at the path).
    public var blocked = 0
    /// Files that would be deleted (see above).
    public var deletions = 0

    public init() {}

    /// `mirror: dry run: 3 files to download (1.2 GiB), 1 to check, 0 to delete; nothing was changed`.
    public var line: String {
        var parts = ["\(files) \(files == 1 ? "file" : "files") to download (\(Formatting.bytes(bytes)))"]
        if checks > 0 { parts.append("\(checks) to check") }
        if blocked > 0 { parts.append("\(blocked) blocked") }
        parts.append("\(deletions) to delete")
        return "mirror: dry run: " + parts.joined(separator: ", ") + "; nothing was changed"
    }
}
