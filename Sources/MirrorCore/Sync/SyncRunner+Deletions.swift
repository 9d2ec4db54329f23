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
            if decision != .delete {
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

extension SyncRunner {
    /// Exit 73 before any request when the files to fetch cannot fit (``SpaceCheck``): better than
    /// filling the disk, failing mid-run and leaving partials that take the space of files that
    /// were already there.
    func requireSpace() throws {
        guard scheduler.readyCount > 0, let partialFolder, let destination else { return }
        let space: FileDescriptor.Space
        do { space = try partialFolder.space() } catch let error as SystemError { throw SyncError.destination(error) }
        let check = SpaceCheck(blockSize: space.blockSize)
        // The blocks of partial files already there count as available to their entries. The
        // folder is read once (`getdents`) and only the names in it are looked at with `fstatat`,
        // rather than one `fstatat` per entry that mostly finds nothing (5000 for 5000 new files).
        let present = (try? partialFolder.entryNames()).map { Set($0.filter(PartialSweep.isPartialName).map { String(decoding: $0, as: UTF8.self) }) }
        // The blocks an entry's partial file holds: looked at only where the folder has that
        // name, or could not be read (its name is a SHA-256 of the path: worked out only then).
        func allocated(_ partialName: @autoclosure () -> String) -> Int64 {
            guard let present else { return partialFolder.allocatedBytes(of: partialName()) }
            guard !present.isEmpty else { return 0 }
            let name = partialName()
            return present.contains(name) ? partialFolder.allocatedBytes(of: name) : 0
        }
        var files: [SpaceCheck.File] = []
        scheduler.planned?.forEach { entry, task in
            files.append(SpaceCheck.File(size: entry.size, allocated: allocated(task?.partialName ?? PartialFile.name(for: entry.path))))
        }
        for task in scheduler.ready { files.append(SpaceCheck.File(size: task.entry.size, allocated: allocated(task.partialName))) }
        let needed = check.needed(files)
        if check.shortfall(needed: needed, free: space.available) != nil {
            throw SyncError.noSpace(destination: destination.path, needed: needed, free: space.available)
        }
    }
}
