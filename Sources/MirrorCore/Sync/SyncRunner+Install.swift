import MirrorFS
import MirrorKit
import MirrorModel

/// The last leg of an entry in a run: its bytes verified and queued for the group commit
/// (``Installer``), the installed files reported, and files already at their path checked.
extension SyncRunner {
    func verifyAndInstall(_ task: EntryTask) {
        guard let partial = task.partial, let installer, let work else { return }
        // The hash trails the transfer: a wrong piece may show only now, with every byte in.
        if partial.checksPieces, partial.checkPieces() != nil {
            return apply(work.wrongPiece(task))
        }
        switch installer.verify(partial, for: task) {
        case .queued:
            task.move(to: .installing)
            if installer.isDue(now: monotonicSeconds()) { dispatchCommit() }
        case .failed(let error):
            apply(work.failed(task, error))
        case .mismatch(let detail, let got):
            apply(work.checksumMismatch(task, partial: partial, detail: detail, got: got))
        }
    }

    /// Hands the verified files waiting in the batch to the commit thread (``CommitThread``), or
    /// commits them here when there is none. While a commit runs the next batch fills; only a full
    /// one waits for it, so at most two batches' partial files are open at once.
    func dispatchCommit() {
        guard let installer else { return }
        guard let committer = threads?.committer else { return commitBatch() }
        if committer.isBusy {
            guard installer.waiting >= InstallBatch.maxFiles else { return }
            committer.waitIdle()
        }
        collectCommits()
        let items = installer.takeBatch()
        guard !items.isEmpty else { return }
        committer.start(items, with: installer.commits)
    }

    /// Reports the commits the commit thread finished.
    func collectCommits() {
        for done in threads?.committer.takeDone() ?? [] { report(done) }
    }

    /// Installs the verified files waiting in the batch, here and now, after any commit in
    /// progress on the commit thread, and reports each: the run's last commit.
    func commitBatch() {
        guard let installer else { return }
        threads?.committer.waitIdle()
        collectCommits()
        report(installer.commit())
    }

    /// Counts and reports the files of a finished commit; its failures fail (or stop) their entries.
    func report(_ done: Installer.Committed) {
        if let error = done.fatal { ending.keepFirstFatal(error) }
        for (task, error) in done.failed { if let work { apply(work.failed(task, error)) } }
        for (task, partial) in done.installed {
            let entry = task.entry
            if task.replacing { summary.replaced += 1 } else { summary.downloaded += 1 }
            let source = entry.size == 0 ? nil : partial.sourceURL
            var result = EntryResult(path: entry.path, outcome: task.replacing ? .replaced : .downloaded, size: entry.size,
                                     source: source.map(redactedURL),
                                     fromMirror: source != nil && source != manifest.sources(for: entry).first)
            if let local = task.attempt.copiedFrom, partial.sourceURL == "file://" + local {
                (result.copiedFrom, result.source, result.fromMirror) = (local, nil, false)
                summary.copied += 1
            }
            task.attempt.delta.index = nil
            if let base = task.attempt.delta.from, partial.isDelta {
                (result.deltaFrom, result.reusedBytes) = (base, task.attempt.delta.reused)
            }
            summary.add(result)
            report.entryFinished(result)
            if let refused = place?.refused, !refused.isEmpty { refused.clear(path: entry.path) }
            if tasks.holdsAny {
                if let verified = journal.records(for: entry.path)?.verified { contentIndex?.add(verified) }
                releaseDuplicates(of: entry.path)
            }
            tasks.retire(task)
        }
    }

    /// A file present at its path and unknown to the journal: hashed on this thread.
    func check(_ entry: ManifestEntry) {
        guard let installer else { return }
        switch installer.check(entry) {
        case .verified(let waiting):
            summary.checked += 1
            if let waiting {
                let now = monotonicSeconds()
                found.add(waiting, now: now)
                if found.isDue(now: now) { recordFound() }
            }
        case .differs: addTask(entry, replacing: true)
        case .copy(let reason, let mirrors):
            // A new inode of this user's takes the name (``FoundFilePolicy``): copied from the
            // file found (``copyLocally(_:)``), verified like a download, renamed into place.
            // A copy of mirror's own file (a mode or time changed in an atomic DEST, whose
            // published generations share the inode) is routine, not worth a warning.
            if !mirrors {
                report.warning("\(destination.display(entry.path)): \(reason); its bytes are copied into a new file of this user's")
            }
            addTask(entry, replacing: true, copyingFound: true, foundIsMirrors: mirrors)
        case .unreadable(let error): fail(entry, "\(error)", unreachable: false, cause: FailureCause(error))
        case .failed(let error): stopOrFail(entry, error)
        }
    }

    /// Makes the files found and hashed so far durable with one `syncfs` and journals them
    /// (``FoundRecords``). Without their records the next run hashes them again; a destination
    /// that refuses writes stops the run.
    func recordFound() {
        guard let partialFolder else { return }
        let count = found.waiting.count
        do {
            try found.flush(to: writer, syncing: partialFolder)
        } catch let error as SystemError where error.isDestinationUnwritable {
            ending.keepFirstFatal(error)
        } catch {
            report.warning("\(count) files found in place and verified were not journaled (\(error)); the next run hashes them again")
        }
    }
}
