import MirrorFS

extension SyncRunner {
    /// Every listed file verified and in place, and nothing stopped the run: only then may files
    /// be deleted (docs/cli.md, "Deleting").
    var everyFileVerified: Bool {
        ending.ranToItsEnd && summary.failed == 0 && summary.pending == 0
    }

    /// `--delete` and `--delete-unlisted`, at the end of a run: the plan (``Reconciler/deletions(for:mode:)``),
    /// the guardrails (``DeletionPolicy``), then the removals (``Deleter``).
    func deleteUnlisted(_ mode: DeletionMode) {
        guard let destination else { return }
        let reconciler = Reconciler(planner: Planner(destination: destination, journal: journal, partialFolder: partialFolder),
                                    journal: journal)
        do {
            var plan = try reconciler.deletions(for: manifest, mode: mode, filter: options.filter, deleteExcluded: options.deleteExcluded)
            let policy = options.deletionPolicy
            let decision = policy.decide(.init(candidates: plan.files.count, known: plan.known,
                                               listed: manifest.entries.count, everyFileVerified: everyFileVerified))
            if let refusal = policy.refusal(decision) {
                summary.deletionRefused = refusal
                report.fatal(refusal)
            } else if decision == .waitForCompleteRun {
                report.notice("deleted nothing: \(plan.files.count) unlisted \(DeletionPolicy.files(plan.files.count)) "
                              + "wait for a run in which every file verifies")
            }
            // A stopped or failed run changes nothing, not even the journal's view of what is gone.
            guard everyFileVerified else { return }
            // Nothing but empty folders to remove is still a deletion `--delete-unlisted` makes
            // ("files, links and empty folders"), but for an empty manifest, which deletes nothing.
            let foldersOnly = decision == .nothing && !manifest.entries.isEmpty
            if decision != .delete && !foldersOnly {
                plan.files = []
                plan.folders = []
                plan.keptFolders = nil
            }
            let done = try Deleter(destination: destination, writer: writer, report: report).run(plan)
            summary.deleted += done.deleted.count
            summary.failed += done.failed.count
            for result in done.deleted + done.failed { summary.add(result) }
        } catch let error as SystemError {
            if error.isDestinationUnwritable {
                ending.keepFirstFatal(error)
            } else {
                summary.deletionRefused = "deleted nothing more: \(error)"
                report.fatal(summary.deletionRefused ?? "")
            }
        } catch {
            summary.deletionRefused = "deleted nothing more: \(error)"
            report.fatal(summary.deletionRefused ?? "")
        }
    }
}
