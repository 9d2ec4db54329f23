import MirrorKit

/// Why a run did not end `ok`, in one line, for its journal record (`reason=`) and so for
/// `mirror status` after it: "incomplete: 0 downloaded, 0 failed" alone did not say that the disk
/// was full (docs/cli.md, "mirror status").
public enum RunReason {
    /// The error that stopped the run (a full or read-only destination) says the most; else why
    /// an incomplete run stopped; nil for a run that ended `ok` or `failed` (its entries say why).
    public static func text(fatal: (any Error)?, result: SyncResult) -> String? {
        if let fatal { return redactingURLs(in: "\(fatal)") }
        if case .incomplete(let why) = result { return why }
        return nil
    }
}
