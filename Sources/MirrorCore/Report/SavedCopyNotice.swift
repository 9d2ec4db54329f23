/// How often a run that uses the saved copy of its manifest (the server cannot be reached) says
/// so on standard error: at most once a day per destination (docs/manifest.md, "Remote manifests and the kept copy").
///
/// Such a run can end `ok`, exit 0, with every file verified against the copy; said every hour,
/// the line made cron mail every machine every hour while the server was down, and a mail that
/// always comes is a mail nobody reads. Once a day it still reaches a person; every run says it in
/// `--log-file`, in `--json` and `--metrics-file` (`manifest.source` "saved_copy", its age) and in
/// `mirror status`, where monitoring should look. When it was last said is kept with the copy
/// (`noted` in `DEST/.mirror/manifest/last.validators`), so it is per destination and survives
/// reboots; a newly fetched copy starts without it, so the next outage is said at once.
public enum SavedCopyNotice {
    public static let interval = 86_400.0

    /// Whether this run says it on standard error: never said for this copy, or said a day ago or
    /// more (or "in the future": a clock set back must not silence it for good).
    public static func isDue(lastNoted: Double?, now: Double) -> Bool {
        guard let lastNoted else { return true }
        return now - lastNoted >= interval || lastNoted > now
    }

    /// Appended to the line when it is said, so a reader knows why it will not come every run.
    public static let remark = " (said here at most once a day; --json, --metrics-file and `mirror status` show it every run)"
}
