import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// The group commit of verified files (``InstallBatch``; docs/journal.md, "Group commit of
/// installs"), apart from the ``Installer`` that verifies them on the sync thread. It holds only
/// `Sendable` parts (the destination, the partial folder, the journal's writer) and takes each
/// file as a ``Placement``, a `Sendable` copy of what the commit needs of it, so it may run on the
/// commit thread (``CommitThread``) with the compiler checking what goes there; the entries and
/// partial files themselves stay on the sync thread, matched to the ``Outcome`` by index.
struct InstallCommit: Sendable {
    let destination: Destination
    let partialFolder: FileDescriptor
    /// The journal's writer, the batch's records' one way in (``JournalWriter``).
    let writer: JournalWriter
    var journal: Journal { writer.journal }

    /// One verified file, as the commit needs it: where it goes, and its partial file's identity,
    /// name, descriptor and source, taken on the sync thread when the batch is handed over.
    struct Placement: Sendable {
        /// The entry's path in DEST.
        let path: String
        let identity: EntryIdentity
        /// The partial file's name in the partial folder (``PartialFile/name``).
        let name: String
        let file: FileDescriptor
        let isUnnamed: Bool
        let sourceURL: String?
        let validator: String?
        /// A copy of a file found at the path keeps that file's standing (``Installer/isFoundCopy(_:)``).
        let foundCopy: Bool
    }

    /// What became of each file of a commit, by its index in the batch.
    struct Outcome: Sendable {
        var installed: [Int] = []
        var failed: [(index: Int, error: any Error)] = []
        /// The destination refused a write (full, read-only): the run stops (exit 73).
        var fatal: SystemError?
    }

    /// Makes `items` durable, renames them into place and journals them. Touches only what it is
    /// given, the destination and the journal (which has its own lock), so it may run on the
    /// commit thread while the sync thread verifies the next files.
    func commit(_ items: [Placement]) -> Outcome {
        var out = Outcome()
        guard !items.isEmpty else { return out }
        let single = items.count == 1
        // The proof that the batch's bytes are durable (``Synced``): the `verified` records below
        // cannot be appended without it. A lone file's `fsync`; for a batch, the `syncfs` after
        // the renames, which covers the bytes and the names.
        var proof: Synced?
        do {
            // The evidence that each file about to appear at its path is mirror's goes first, so
            // the one `syncfs` that makes the files durable makes it durable too (the journal is
            // on DEST's file system); a lone file's `fsync` does not reach the journal, which is
            // then synced on its own.
            let intents = try recordIntent(items)
            if single {
                proof = try items[0].file.sync()
                if intents { try writer.sync() }
            } else {
                try partialFolder.syncFilesystem()
            }
        } catch {
            for item in items { item.file.close() }
            if let error = error as? SystemError, error.isDestinationUnwritable { out.fatal = error } else {
                out.failed = items.indices.map { ($0, error) }
            }
            return out
        }
        var installed: [(index: Int, status: FileStatus)] = []
        // Files that were in the way of a new one and went (``PathTurn``): journaled with the batch.
        var removed: [JournalNote] = []
        for (index, item) in items.enumerated() {
            defer { item.file.close() }
            do {
                installed.append((index, try install(item, syncFolder: single, removed: &removed)))
            } catch {
                out.failed.append((index, error))
            }
        }
        destination.forgetInstallFolder()
        do {
            if !single && !installed.isEmpty { proof = try partialFolder.syncFilesystem() }
            CrashPoint.hit("install-before-record")
            // The partial file's identity is its entry's (``PartialFile/identity``), already made.
            let verified = installed.map { index, status in
                VerifiedRecord(identity: items[index].identity, status: status, adopted: items[index].foundCopy)
            }
            if let proof = proof.take() {
                try writer.append(verified: verified, notes: removed, proof: proof)
            } else {
                try writer.append(removed, durable: true)
            }
        } catch let error as SystemError {
            // The files are in place and complete; without their records the next run hashes them.
            if error.isDestinationUnwritable { out.fatal = error }
        } catch {}
        out.installed = installed.map(\.index)
        return out
    }

    /// Before the batch's renames and links: each file whose path's `partial` record does not yet
    /// name its inode (a small download with no name, a local copy) gets one, made durable with
    /// the batch's files, so that a kill between the install and the `verified` record leaves
    /// evidence that the file at the path is mirror's (``InstalledFile``), not a file of the
    /// user's. Its byte count is the whole file and it carries no hash state, so it vouches for
    /// no byte (docs/journal.md, rule 1): a named partial file it describes is hashed again if
    /// resumed, one with no name is gone with the kill. True when it appended any.
    private func recordIntent(_ items: [Placement]) throws -> Bool {
        var intents: [JournalNote] = []
        for item in items {
            let status = try item.file.stat()
            // A file with no name never had a record of its inode; a named one may have.
            if !item.isUnnamed, writer.journal.records(for: item.identity.path)?.partial?.fileInode == status.inode { continue }
            intents.append(.partialWithoutStates(PartialRecord(identity: item.identity, url: item.sourceURL.map(redactedURL) ?? "", validator: item.validator,
                                                  bytes: item.identity.size, fileInode: status.inode,
                                                  fileChangeTime: status.ctime)))
        }
        guard !intents.isEmpty else { return false }
        try writer.append(intents)
        return true
    }
}

extension InstallBatch.Item {
    /// What the commit needs of this file (``InstallCommit/Placement``).
    var placement: InstallCommit.Placement {
        InstallCommit.Placement(path: task.entry.path, identity: partial.identity, name: partial.name, file: partial.file,
                                isUnnamed: partial.isUnnamed, sourceURL: partial.sourceURL, validator: partial.validator,
                                foundCopy: Installer.isFoundCopy(self))
    }
}
