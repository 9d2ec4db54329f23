import MirrorFS
import MirrorState

/// Carries out a ``DeletionPlan`` once ``DeletionPolicy`` allows it: removes each planned file
/// that is still the file planned, then the folders this left empty, and drops their records
/// from the journal (docs/cli.md, "Deleting"; docs/journal.md, "Records").
///
/// Order and crash safety: a file is removed (`unlinkat`), then its record is dropped with a
/// `forget path=... all=1` line; the journal is synced once at the end of the run. A crash in
/// between leaves a record for a file that is gone, which the next run's plan finds (`stale`) and
/// drops: a deletion is never undone, and never repeated on another file.
struct Deleter {
    let destination: Destination
    let writer: JournalWriter?
    let report: ConsoleReport

    struct Outcome {
        var deleted: [EntryResult] = []
        /// A removal the destination refused (permissions, read-only): the run fails (exit 1).
        var failed: [EntryResult] = []
        var foldersRemoved = 0
    }

    func run(_ plan: DeletionPlan) throws -> Outcome {
        var out = Outcome()
        for path in plan.stale { try writer?.append(.removed(path: path), durable: false) }
        for path in plan.changed {
            report.warning("kept \(destination.display(path)): it changed after mirror installed it, so it is yours now "
                           + "(mirror forgets it and never deletes it)")
            try writer?.append(.removed(path: path), durable: false)
        }
        // One remover for the batch: a plan made by a walk lists files depth first, and each
        // folder is then opened about once however deep it is.
        var remover: Destination.Remover? = try destination.remover()
        for item in plan.files {
            let display = item.display
            do {
                switch try remover?.removeFile(item.path, expected: item.status) {
                case .removed, .gone:
                    let result = EntryResult(path: display, outcome: .deleted, size: item.status.size, source: nil)
                    out.deleted.append(result)
                    report.entryFinished(result)
                case .changed, nil:
                    report.warning("kept \(destination.display(display)): it changed while the run went on "
                                   + "(mirror forgets it and never deletes it)")
                }
                // Valid UTF-8 or not, the journal only ever recorded UTF-8 paths (a manifest's).
                if let path = String(validating: item.path, as: UTF8.self) {
                    try writer?.append(.removed(path: path), durable: false)
                }
            } catch let error as SystemError where error.isDestinationUnwritable {
                throw error
            } catch {
                var result = EntryResult(path: display, outcome: .failed("cannot delete: \(error)"), size: item.status.size, source: nil)
                result.cause = .cannotDelete(code: (error as? SystemError)?.code)
                out.failed.append(result)
                report.entryFinished(result)
            }
        }
        for folder in plan.folders where remover?.removeFolderIfEmpty(folder) == true { out.foldersRemoved += 1 }
        remover = nil  // its descriptors closed before the walk opens its own
        if let kept = plan.keptFolders {
            // As for the folders above: best effort, a folder that cannot go stays.
            let others = plan.otherDestinations
            out.foldersRemoved += (try? destination.removeEmptyFolders(
                skippingTopLevel: Destination.stateFolderName, keeping: { kept.contains(PathKey(bytes: $0)) },
                leavingWhole: others.isEmpty ? nil : { others.contains(PathKey(bytes: $0)) })) ?? 0
        }
        if !plan.files.isEmpty || out.foldersRemoved > 0 { try destination.syncAll() }
        return out
    }
}
