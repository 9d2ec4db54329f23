/// A run that planned, then stopped on an error that ends the whole run (a full disk, an
/// unwritable DEST): the error, with what the run did before it.
///
/// The summary goes with the error so that whoever reports the run can say both: the summary
/// line under `--summary`, the bytes received in the metrics file and `--json` (docs/cli.md,
/// "Output"), as the journal's run record already does for `mirror status`. Without it a disk
/// that filled mid-run reported 0 bytes transferred and no summary line, though megabytes had come.
public struct SyncStopped: ExitCoded {
    public let cause: SyncError
    public let summary: SyncSummary

    public var exitStatus: Int32 { cause.exitStatus }
    public var description: String { cause.description }
}
