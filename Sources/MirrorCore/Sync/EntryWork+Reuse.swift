import MirrorFS
import MirrorState

extension EntryWork {
    /// Reuse by content (docs/cli.md, "Reuse by content"): before the first request for an entry
    /// that starts from nothing, a file on this machine with its size and digests (an unchanged
    /// file in DEST the journal verified, or a `--seed` file) is copied into its partial file
    /// (``LocalCopy``). True when the partial file now holds every byte: it is then verified like
    /// a download, and a mismatch sends the entry to its sources as usual. Tried once per entry.
    ///
    /// The copy is always a new inode, made by this process (``LocalCopy``, `O_CREAT | O_EXCL`)
    /// and sealed with the entry's mode: never a link to the source, so a seed or a file of
    /// another user's gives its bytes and nothing else (``FoundFilePolicy``). A file found at the
    /// entry's own path that may not stay as it is (``Attempts/copyFound``) is the source first.
    func copyLocally(_ task: EntryTask) -> Bool {
        guard !task.attempt.triedLocalCopy, task.resume == nil, task.resumeOffset == 0, task.entry.size > 0 else { return false }
        let destination = place.destination
        task.attempt.triedLocalCopy = true
        let path = task.entry.path
        let source: ContentIndex.Source
        if task.attempt.copyFound, let file = try? destination.openForReading(path) {
            source = ContentIndex.Source(file: file, display: destination.display(path))
        } else if let found = place.contentIndex.source(for: task.entry) {
            source = found
        } else {
            return false
        }
        defer { source.file.close() }
        let name = PartialFile.name(for: path)
        do {
            // A fresh file takes the name: the journal stops vouching for an old one first.
            try PartialJournal(writer: place.writer, identity: EntryIdentity(task.entry)).forgetIfRecorded()
            _ = try LocalCopy.copy(source.file, size: task.entry.size, to: name, in: place.partialFolder,
                                   displayPath: destination.displayState(".mirror/partial/" + name))
            task.attempt.copiedFrom = source.display
            return true
        } catch {
            report.warning("\(path): cannot copy it from \(source.display) (\(error)); downloading it instead")
            return false
        }
    }
}
