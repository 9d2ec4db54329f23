extension SyncRunner {
    /// Reuse by content (docs/cli.md, "Reuse by content"): before the first request for an entry
    /// that starts from nothing, a file on this machine with its size and digests (an unchanged
    /// file in DEST the journal verified, or a `--seed` file) is copied into its partial file
    /// (``LocalCopy``). True when the partial file now holds every byte: it is then verified like
    /// a download, and a mismatch sends the entry to its sources as usual. Tried once per entry.
    func copyLocally(_ task: EntryTask) -> Bool {
        guard !task.attempt.triedLocalCopy, task.resume == nil, task.resumeOffset == 0, task.entry.size > 0,
              let partialFolder, let index = contentIndex else { return false }
        task.attempt.triedLocalCopy = true
        guard let source = index.source(for: task.entry) else { return false }
        defer { source.file.close() }
        let path = task.entry.path
        let name = PartialFile.name(for: path)
        do {
            // A fresh file takes the name: the journal stops vouching for an old one first.
            if journal.partialRecord(for: path) != nil { try journal.append(.forget(path: path), durable: true) }
            _ = try LocalCopy.copy(source.file, size: task.entry.size, to: name, in: partialFolder,
                                   displayPath: destination.displayState(".mirror/partial/" + name))
            task.attempt.copiedFrom = source.display
            return true
        } catch {
            report.warning("\(path): cannot copy it from \(source.display) (\(error)); downloading it instead")
            return false
        }
    }
}
