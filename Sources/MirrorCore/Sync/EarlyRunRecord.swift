import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// The journal's run record of a run that ended before it opened the journal, for `mirror status`
/// after it (docs/cli.md, "`mirror status`": the last run and why it stopped).
///
/// Only for an end that says something about DEST's manifest that status must not hide: a
/// manifest URL the server says is not there (404, 410). Without the record, status went on
/// showing the last run that did sync, `ok`, while cron ran a mistyped URL every hour.
///
/// The record is written as a sync writes its own: under DEST's lock (``DestinationLock``, taken
/// without waiting, never creating state), into a journal this user owns, made durable. It is
/// best effort: a DEST with no state (nothing to show a status of), a lock another run holds (that
/// run writes its own record) or a journal that cannot be written leaves no record, and the run's
/// exit code and message stay what they were.
enum EarlyRunRecord {
    static func append(destination: String, start: Double, result: String, reason: String, manifest: ManifestSource? = nil) {
        guard let identity = try? DestinationIdentity.resolve(destination),
              let lock = try? DestinationLock.take(identity, creating: .nothing, wait: false) else { return }
        defer { lock.release() }
        guard let state = lock.stateFolder else { return }
        let shown = state.displayPath + "/" + Journal.fileName
        guard (try? StateOwnership.require(state, state.displayPath)) != nil,
              let journal = try? Journal(folder: state, displayPath: shown, readOnly: false) else { return }
        let now = currentUnixTime()
        let run = RunRecord(start: Int64(start), end: Int64(now), result: result, downloaded: 0, failed: 0, bytes: 0,
                            reason: redactingURLs(in: reason), manifest: manifest?.rawValue)
        try? JournalWriter(journal).append(.run(run), durable: true)
    }
}
