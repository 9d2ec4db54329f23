/// The sysexits-style codes of docs/cli.md, so that cron wrappers can tell outcomes apart.
public enum ExitStatus {
    public static let ok: Int32 = 0
    public static let entriesFailed: Int32 = 1
    public static let usage: Int32 = 64          // EX_USAGE
    public static let invalidManifest: Int32 = 65 // EX_DATAERR
    public static let cannotWrite: Int32 = 73    // EX_CANTCREAT
    public static let tryLater: Int32 = 75       // EX_TEMPFAIL

    public static func code(for result: SyncResult) -> Int32 {
        switch result {
        case .ok: return ok
        case .failed: return entriesFailed
        case .incomplete: return tryLater
        }
    }

    public static func code(for error: SyncError) -> Int32 {
        switch error {
        case .manifest: return invalidManifest
        case .noDestination: return usage
        case .destination: return cannotWrite
        case .locked: return tryLater
        case .setup: return entriesFailed
        }
    }
}
