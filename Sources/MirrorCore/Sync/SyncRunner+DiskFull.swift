import MirrorFS

extension SyncRunner {
    /// ``RunEnding/fatal`` worded with the entry whose partial file could not be written, the bytes it still
    /// needs and the bytes free (``DiskSpace/explain(_:entry:needed:free:)``); `error` as it is when
    /// it is not about a partial file of this run (the journal, an install).
    func explainedFatal(_ error: SystemError) -> SystemError {
        guard let partialFolder else { return error }
        for task in tasks.all {
            let name = PartialFile.name(for: task.entry.path)
            guard error.path.utf8.count >= name.utf8.count, error.path.utf8.suffix(name.utf8.count).elementsEqual(name.utf8) else {
                continue
            }
            let held = task.partial?.length ?? task.resumeOffset
            return DiskSpace.explain(error, entry: task.entry.path, needed: max(0, task.entry.size - held),
                                     free: DiskSpace.free(in: partialFolder))
        }
        return error
    }
}
