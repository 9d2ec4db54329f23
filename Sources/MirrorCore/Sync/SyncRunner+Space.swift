import MirrorFS

// Space on DEST: checked before the first request, and the words of a run that ran out of it.

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
