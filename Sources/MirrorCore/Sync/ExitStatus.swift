/// The sysexits-style codes of docs/cli.md, so that cron wrappers can tell outcomes apart.
public enum ExitStatus {
    public static let ok: Int32 = 0
    public static let entriesFailed: Int32 = 1
    public static let usage: Int32 = 64          // EX_USAGE
    public static let invalidManifest: Int32 = 65 // EX_DATAERR
    public static let manifestUnreadable: Int32 = 66 // EX_NOINPUT
    public static let cannotWrite: Int32 = 73    // EX_CANTCREAT
    public static let tryLater: Int32 = 75       // EX_TEMPFAIL

    public static func code(for result: SyncResult) -> Int32 {
        switch result {
        case .ok: return ok
        case .failed: return entriesFailed
        case .incomplete: return tryLater
        }
    }
}

/// An error that knows the exit code (docs/cli.md) of a command it ends, so that the executable
/// and ``SyncSession`` map an error to its code by its type and case, never by its message: a
/// reworded message cannot change an exit code that cron wrappers and monitoring rely on.
/// The codes of every such error are in ErrorExitStatus.swift, side by side.
public protocol ExitCoded: Error, CustomStringConvertible {
    var exitStatus: Int32 { get }
}
