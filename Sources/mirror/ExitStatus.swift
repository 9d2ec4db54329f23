import MirrorCore

/// The sysexits-style codes of cli-contract.md.
enum ExitStatus {
    static let ok: Int32 = 0
    static let entriesFailed: Int32 = 1
    static let usage: Int32 = 64          // EX_USAGE
    static let invalidManifest: Int32 = 65 // EX_DATAERR
    static let cannotWrite: Int32 = 73    // EX_CANTCREAT
    static let tryLater: Int32 = 75       // EX_TEMPFAIL

    static func code(for result: SyncResult) -> Int32 {
        switch result {
        case .ok: return ok
        case .failed: return entriesFailed
        case .incomplete: return tryLater
        }
    }

    static func code(for error: SyncError) -> Int32 {
        switch error {
        case .manifest: return invalidManifest
        case .noDestination: return usage
        case .destination: return cannotWrite
        case .locked: return tryLater
        case .setup: return entriesFailed
        }
    }
}
