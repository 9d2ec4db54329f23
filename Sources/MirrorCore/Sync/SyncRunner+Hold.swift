import MirrorFS
import MirrorKit
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// A rollback that holds, and kept generations as sources (docs/cli.md, "mirror rollback" and
/// "Reuse by content"): an atomic run first asks ``HoldPolicy`` whether DEST is held at an older
/// generation for this manifest; a run that publishes records which manifest built the
/// generation (``HoldFile``), so a rollback from it knows what to hold against.
extension SyncRunner {
    /// True when DEST is held (``HoldPolicy``): nothing is built, downloaded or journaled; the
    /// summary says so (``SyncSummary/hold``) and the run ends `ok`, exit 0: the hold is what an
    /// operator asked for, and a cron job must not alert on it. A hold that no longer applies
    /// (another manifest, DEST switched by hand) is removed, durably, and the run goes on.
    func isHeld(_ store: GenerationStore) throws -> Bool {
        let state = try store.stateFolder()
        defer { state.close() }
        guard let hold = try HoldFile.readHold(in: state) else { return false }
        var current: Int?
        if case .generation(let n) = store.current() { current = n }
        switch HoldPolicy.decide(.init(hold: hold, current: current, manifestSHA256: origin.digest())) {
        case .none:
            return false
        case .hold(let hold):
            summary.hold = hold
            summary.total = manifest.entries.count
            summary.seconds = monotonicSeconds() - startTime
            summary.lastSuccess = journal.lastSuccess?.end
            report.notice(SyncSummary.heldLine(hold, dest: store.destPath))
            report.logLine("info", SyncSummary.heldLine(hold, dest: store.destPath))
            return true
        case .release(let hold, let why):
            try HoldFile.removeHold(in: state)
            let reason: String
            switch why {
            case .otherManifest: reason = "this manifest is not the one rolled back from"
            case .moved: reason = "DEST no longer shows generation \(hold.generation)"
            case .unknownManifest: reason = "this manifest's digest cannot be read"
            }
            report.notice("\(store.destPath): released the hold at generation \(hold.generation) (\(reason)); syncing as usual")
            report.logLine("info", "\(store.destPath): released the hold at generation \(hold.generation) (\(reason))")
            return false
        }
    }

    /// After a publish: generation `n` was built from this run's manifest. Without the record a
    /// rollback from `n` could not hold; a failure to write it costs only that, so it is a warning.
    func recordBuiltFrom(_ store: GenerationStore, generation n: Int) {
        guard let digest = origin.digest() else { return }
        do {
            let state = try store.stateFolder()
            defer { state.close() }
            try HoldFile.recordBuiltFrom(digest, generation: n, existing: try store.generations(), in: state)
        } catch {
            report.warning("cannot record which manifest built generation \(n) (\(error)); a rollback from it will not hold")
        }
    }

    /// A current generation found complete for this manifest was built from it (or from one with
    /// the same files): recorded when nothing is yet, so that a set published by an earlier mirror
    /// can be held after a rollback too.
    func recordBuiltFromIfMissing(_ store: GenerationStore) {
        guard case .generation(let n) = store.current(), let state = try? store.stateFolder() else { return }
        defer { state.close() }
        if (try? HoldFile.builtFrom(in: state))?[n] == nil { recordBuiltFrom(store, generation: n) }
    }

    /// The entry's file in a kept generation, newest first, that the journal verified as this
    /// version (same size, digests, inode, times: ``Journal/isVerified(_:status:)``): rolling
    /// forward to a set a kept generation holds links it, as unchanged files are linked from the
    /// current set, instead of downloading it.
    func keptCopy(of entry: ManifestEntry) -> (Destination, FileStatus)? {
        for set in keptGenerations {
            guard let status = try? set.status(of: entry.path), status.isRegularFile,
                  journal.isVerified(entry, status: status) else { continue }
            return (set, status)
        }
        return nil
    }
}
