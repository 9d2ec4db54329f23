import MirrorKit

/// What `sync --dry-run` would do, in totals, after its plan lines (docs/cli.md, `--dry-run`): a plan of
/// 20,000 lines says nothing at a glance, and a script wants the numbers (`--json`: `dry_run`).
///
/// `bytes` is what the run would receive from the network, as its `bytes_transferred` counts it:
/// a file copied from this machine costs none, a chunk delta its ranges and its index.
/// `deletions`: what `--delete`, `--delete-unlisted` or an atomic switch would remove (0 when the
/// guardrails would refuse, which the dry run says too).
public struct DryRunTotals: Codable, Equatable, Sendable {
    /// Entries that would be downloaded, replaced or resumed (as a delta or whole; not the copies).
    public var files = 0
    /// Bytes that would be downloaded for them (a resume counts only what is missing, a delta
    /// its ranges and chunk index).
    public var bytes: Int64 = 0
    /// Of ``files``, those that would be synced as chunk deltas.
    public var deltas = 0
    /// Of ``files``, those that would replace a file at their path (`replace` in the plan).
    public var replacements = 0
    /// Entries whose bytes would be copied from a file on this machine (reuse by content).
    public var copies = 0
    /// Present files no sync has verified, which would be hashed (and fetched only if they differ).
    public var checks = 0
    /// Entries that cannot be placed (something else is at the path).
    public var blocked = 0
    /// Files that would be deleted (see above).
    public var deletions = 0

    public init() {}

    /// A document written before `deltas` and `copies` were counted reads them as 0.
    public init(from decoder: Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        files = try values.decode(Int.self, forKey: .files)
        bytes = try values.decode(Int64.self, forKey: .bytes)
        deltas = try values.decodeIfPresent(Int.self, forKey: .deltas) ?? 0
        copies = try values.decodeIfPresent(Int.self, forKey: .copies) ?? 0
        replacements = try values.decodeIfPresent(Int.self, forKey: .replacements) ?? 0
        checks = try values.decode(Int.self, forKey: .checks)
        blocked = try values.decode(Int.self, forKey: .blocked)
        deletions = try values.decode(Int.self, forKey: .deletions)
    }

    /// `mirror: dry run: 3 files to download (1.2 GiB, 1 as a delta), 2 to copy, 1 to check, 0 to
    /// delete; nothing was changed` (the delta, copy, check and blocked counts only when not 0);
    /// `2 files to download and 1 to replace` when some replace a file at their path, as their
    /// plan lines say.
    public var line: String {
        var bytesPart = Formatting.bytes(bytes)
        if deltas > 0 { bytesPart += ", \(deltas) as \(deltas == 1 ? "a delta" : "deltas")" }
        let downloads = files - replacements
        let fetched = replacements == 0 ? "\(files) \(files == 1 ? "file" : "files") to download"
            : downloads == 0 ? "\(replacements) \(replacements == 1 ? "file" : "files") to replace"
            : "\(downloads) \(downloads == 1 ? "file" : "files") to download and \(replacements) to replace"
        var parts = ["\(fetched) (\(bytesPart))"]
        if copies > 0 { parts.append("\(copies) to copy") }
        if checks > 0 { parts.append("\(checks) to check") }
        if blocked > 0 { parts.append("\(blocked) blocked") }
        parts.append("\(deletions) to delete")
        return "mirror: dry run: " + parts.joined(separator: ", ") + "; nothing was changed"
    }
}
