import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState
#if canImport(Glibc)
import Glibc
#endif

/// What the journal and one `stat` say about one manifest entry.
public struct EntryStatus: Sendable, Equatable {
    public enum State: String, Sendable {
        /// The journal verified this very file (same size, inode, device, mtime and ctime).
        case done
        /// A partial download is under `DEST/.mirror/partial/`, with this many durable bytes.
        case partial
        /// The last run that tried the entry failed (``EntryStatus/error``).
        case failed
        /// A file is at the path but the journal cannot vouch for it (changed since it was verified,
        /// or never verified by `mirror`): the next sync hashes it, `mirror verify` checks it now.
        case unverified
        /// Something other than a regular file is at the path: a sync cannot place the file.
        case blocked
        /// Nothing at the path and nothing downloaded yet.
        case missing
    }

    /// The entry's path, sharing the manifest's bytes (``ManifestPath``): a fresh DEST lists
    /// every entry, and a string each was 80 MB for 10^6 paths of 47 bytes.
    public var pathBytes: ManifestPath
    public var size: Int64
    public var state: State
    /// What only a partial, failed or blocked entry has, behind one reference: 40 bytes an entry
    /// instead of 80, for the 10^6 missing entries of a fresh DEST (docs/performance.md,
    /// "Reports that stream").
    private var details: Details?

    private final class Details: Sendable {
        let partialBytes: Int64?
        let error: String?
        let failedAt: Int64?

        init?(partialBytes: Int64?, error: String?, failedAt: Int64?) {
            guard partialBytes != nil || error != nil || failedAt != nil else { return nil }
            self.partialBytes = partialBytes
            self.error = error
            self.failedAt = failedAt
        }
    }

    public init(path: String, state: State, size: Int64, partialBytes: Int64? = nil, error: String? = nil, failedAt: Int64? = nil) {
        self.init(pathBytes: ManifestPath(path), state: state, size: size, partialBytes: partialBytes, error: error, failedAt: failedAt)
    }

    public init(pathBytes: ManifestPath, state: State, size: Int64, partialBytes: Int64? = nil, error: String? = nil,
                failedAt: Int64? = nil) {
        self.pathBytes = pathBytes
        self.size = size
        self.state = state
        details = Details(partialBytes: partialBytes, error: error, failedAt: failedAt)
    }

    public var path: String { pathBytes.string }

    /// Durable bytes of a partial download (also set for a failed entry whose partial file remains).
    public var partialBytes: Int64? {
        get { details?.partialBytes }
        set { details = Details(partialBytes: newValue, error: error, failedAt: failedAt) }
    }

    /// The last error (failed) or what is in the way (blocked).
    public var error: String? {
        get { details?.error }
        set { details = Details(partialBytes: partialBytes, error: newValue, failedAt: failedAt) }
    }

    /// When the failure was recorded (seconds since the epoch).
    public var failedAt: Int64? {
        get { details?.failedAt }
        set { details = Details(partialBytes: partialBytes, error: error, failedAt: newValue) }
    }

    public static func == (a: EntryStatus, b: EntryStatus) -> Bool {
        a.pathBytes == b.pathBytes && a.size == b.size && a.state == b.state
            && a.partialBytes == b.partialBytes && a.error == b.error && a.failedAt == b.failedAt
    }

    /// Percentage of the file held as a durable partial download, one decimal.
    public var percent: Double? {
        guard let partialBytes else { return nil }
        guard size > 0 else { return 100 }
        return (Double(partialBytes) * 1000 / Double(size)).rounded(.down) / 10
    }
}

/// The answer of `mirror status`.
public struct DestinationStatus: Sendable {
    public var destination: String
    /// False when DEST does not exist yet.
    public var destinationExists: Bool
    /// Every entry that is not done, in manifest order. A done entry is only counted
    /// (``count(_:)``, ``bytes(_:)``): 10^6 of them were ~80 MB of values saying "done".
    public private(set) var entries: [EntryStatus] = []
    /// Entries in the manifest, and their bytes.
    public private(set) var totalFiles = 0
    public private(set) var totalBytes: Int64 = 0
    /// Entries of the manifest that `--include`/`--exclude` left out (not in ``totalFiles``);
    /// set by the caller, which selected the entries (``PathFilter``).
    public var excluded = 0
    private var files: [EntryStatus.State: Int] = [:]
    private var byteCounts: [EntryStatus.State: Int64] = [:]
    public var lastRun: RunRecord?
    /// The last run that ended `ok` (``Journal/lastSuccess``).
    public var lastSuccess: RunRecord?
    /// The manifest this status was made with (a file, or the copy kept for a URL); set by the caller.
    public var manifest: ManifestProvenance?
    /// The newest signed manifest this DEST accepted with `--trust` (``AcceptedManifests``).
    public var acceptedSerial: AcceptedManifest?
    /// The manifest read is a checksum list or Metalink file whose OpenPGP signature a run checked
    /// (its kept copy's mark): the serial accepted is a signature's time (docs/signing.md).
    public var serialIsSignatureTime = false
    /// The pid of a sync holding the destination's lock right now, when one does.
    public var runningPid: Int?
    /// A run that took the lock and never ended (killed, or the machine stopped), when nothing
    /// runs now and no run ended after it (``DestinationLock/leftBehind(in:)``): the next sync
    /// goes on from where it left off.
    public var interruptedRun: InterruptedRun?

    public struct InterruptedRun: Sendable, Equatable {
        /// When it took the lock, Unix seconds.
        public var start: Int64
        public var pid: Int
    }
    /// True when the journal's file exists (false: never synced, or the journal was deleted).
    public var hasJournal: Bool
    /// An atomic DEST (``GenerationStore``): the complete generations kept, oldest first, the one
    /// DEST shows, and whether a next one is being built. nil for a plain DEST.
    public var generations: Generations?

    public struct Generations: Sendable, Equatable {
        public var kept: [Int]
        public var current: Int
        public var building: Bool
        /// A rollback's hold (``HoldPolicy``), read as found: status trusts nothing and changes nothing.
        public var hold: RollbackHold? = nil
    }

    public init(destination: String, destinationExists: Bool, entries: [EntryStatus] = [], lastRun: RunRecord?,
                lastSuccess: RunRecord? = nil, manifest: ManifestProvenance? = nil, runningPid: Int?, hasJournal: Bool,
                generations: Generations? = nil) {
        self.destination = destination
        self.destinationExists = destinationExists
        self.lastRun = lastRun
        self.lastSuccess = lastSuccess
        self.manifest = manifest
        self.runningPid = runningPid
        self.hasJournal = hasJournal
        self.generations = generations
        for entry in entries { add(entry) }
    }

    /// Counts `entry`, and keeps it unless it is done.
    mutating func add(_ entry: EntryStatus) {
        totalFiles += 1
        totalBytes = totalBytes.addingClamped(entry.size)
        files[entry.state, default: 0] += 1
        byteCounts[entry.state, default: 0] = byteCounts[entry.state, default: 0].addingClamped(entry.size)
        if entry.state != .done { entries.append(entry) }
    }

    /// Room for `count` entries that are not done, so that 10^6 of them are not copied at each
    /// doubling (reserved pages that are never written are never resident).
    mutating func reserve(_ count: Int) { entries.reserveCapacity(count) }

    /// Counts a done entry of `size` bytes without making its ``EntryStatus``.
    mutating func addDone(size: Int64) {
        totalFiles += 1
        totalBytes += size
        files[.done, default: 0] += 1
        byteCounts[.done, default: 0] += size
    }

    public func count(_ state: EntryStatus.State) -> Int { files[state] ?? 0 }
    public func bytes(_ state: EntryStatus.State) -> Int64 { byteCounts[state] ?? 0 }
}

/// `mirror status`: explains the journal with one `fstatat` per entry (and one per partial file).
///
/// Strictly read-only, so it can run beside a sync at any moment: the journal is opened `O_RDONLY`
/// and replayed (``Journal/init(folder:displayPath:readOnly:)`` with `readOnly`, which never
/// truncates a torn tail nor compacts); a tail that a running sync is appending is simply not yet
/// seen; a compaction replaces the file by `rename`, so the open descriptor reads the old or the new
/// journal, both complete. The lock is never taken (not even a shared `flock`, which would make a
/// sync starting at that instant exit 75): whether a sync holds it is read from `/proc/locks`.
/// Nothing is created, not even `DEST/.mirror`. No file is read, no network is used.
public enum StatusInspector {
    /// What status reads of DEST before it looks at any entry: the folder (nil when it does not
    /// exist), `.mirror`, the journal replayed, and the partial folder.
    struct Opened {
        var destination: Destination?
        var state: FileDescriptor?
        var journal: Journal?
        var hasJournal = false
        var partials: FileDescriptor?

        /// Independent of the manifest, so ``StatusDisk`` can do it while the manifest is parsed.
        static func open(_ destinationPath: String) throws -> Opened {
            guard let destination = try Destination.openExisting(destinationPath) else { return Opened() }
            var opened = Opened(destination: destination, state: try destination.stateFolder(create: false))
            if let state = opened.state {
                var st = stat()
                opened.hasJournal = fstatat(state.fd, Journal.fileName, &st, AT_SYMLINK_NOFOLLOW) == 0
                if opened.hasJournal {
                    opened.journal = try Journal(folder: state, displayPath: destination.displayState(".mirror/journal"), readOnly: true)
                }
            }
            opened.partials = try destination.stateFolder("partial", create: false)
            return opened
        }
    }

    /// - Parameter disk: DEST opened meanwhile (``StatusDisk``); used when it is the same path.
    public static func inspect(manifest: Manifest, destinationPath: String, disk: StatusDisk? = nil) throws -> DestinationStatus {
        let opened = try disk?.opened(for: destinationPath) ?? Opened.open(destinationPath)
        guard let destination = opened.destination else {
            var status = DestinationStatus(destination: destinationPath, destinationExists: false, lastRun: nil,
                                           runningPid: firstRunHolder(destinationPath), hasJournal: false)
            status.reserve(manifest.entries.count)
            for entry in manifest.entries { status.add(EntryStatus(pathBytes: entry.pathBytes, state: .missing, size: entry.size)) }
            return status
        }
        let (state, journal, hasJournal, partials) = (opened.state, opened.journal, opened.hasJournal, opened.partials)
        var status = DestinationStatus(destination: destinationPath, destinationExists: true,
                                       lastRun: journal?.lastRun, lastSuccess: journal?.lastSuccess, runningPid: state.flatMap(lockHolder),
                                       hasJournal: hasJournal)
        status.reserve(manifest.entries.count)
        status.acceptedSerial = state.flatMap { try? AcceptedManifests.read(in: $0) }
        status.serialIsSignatureTime = manifest.signedListSHA256 != nil
        // Planned as a sync plans (a thread per core, in manifest order); only what is not done is kept.
        let reconciler = Reconciler(planner: Planner(destination: destination, journal: journal, partialFolder: partials),
                                    journal: journal)
        let syncRuns = status.runningPid != nil
        // A run record ends in whole seconds: one that ended in the very second the lock was
        // taken is not known to be that run's end, so the lock's word stands.
        if !syncRuns, let state, let left = DestinationLock.leftBehind(in: state), (journal?.lastRun?.end ?? Int64.min) <= left.since {
            status.interruptedRun = DestinationStatus.InterruptedRun(start: left.since, pid: left.pid)
        }
        reconciler.forEachAction(in: manifest.entries) { entry, action in
            if case .upToDate = action {
                status.addDone(size: entry.size)
            } else if syncRuns, case .check = action, isBeingRelinked(entry, in: destination, journal: journal) {
                status.addDone(size: entry.size)
            } else {
                status.add(self.status(of: entry, action: action, journal: journal))
            }
        }
        if let store = destination.generations, case .generation(let current) = store.current() {
            status.generations = DestinationStatus.Generations(kept: (try? store.generations()) ?? [current], current: current,
                                             building: faccessat(store.store.fd, GenerationStore.buildingName, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
            if let state = try? store.stateFolder() {
                status.generations?.hold = try? HoldFile.readHold(in: state, trust: false)
                state.close()
            }
        }
        return status
    }

    /// Whether a file the journal verified differs from its record only in its change time,
    /// while a sync runs: that sync's hard links (an atomic run seeding or pruning generations)
    /// moved it, and its records follow after the loop. Without a running sync the file is
    /// `unverified`, as a sync would hash it.
    static func isBeingRelinked(_ entry: ManifestEntry, in destination: Destination, journal: Journal?) -> Bool {
        guard let record = journal?.records(for: entry.path)?.verified, record.identity == EntryIdentity(entry),
              let now = try? destination.status(of: entry.path) else { return false }
        return record.matchesButForChangeTime(now) && FoundFilePolicy.current.keeps(now, for: entry)
    }

    /// One entry's state: what a sync would plan for it (``Planner``, so records made for another
    /// size or checksum of the path are ignored exactly as a sync ignores them, docs/journal.md rule 4),
    /// with the journal's last failure on top of anything not done or blocked.
    static func status(of entry: ManifestEntry, action: PlannedAction, journal: Journal?) -> EntryStatus {
        var result = EntryStatus(pathBytes: entry.pathBytes, state: .missing, size: entry.size)
        switch action {
        case .upToDate:
            result.state = .done
            return result
        case .blocked(let reason):
            result.state = .blocked
            result.error = reason
            return result
        case .resume(let from, _):
            result.state = .partial
            result.partialBytes = from
        case .check, .download(replacing: true):
            result.state = .unverified
        case .download(replacing: false):
            result.state = .missing
        }
        if let failed = journal?.records(for: entry.path)?.failed, failed.identity == EntryIdentity(entry) {
            result.state = .failed
            result.error = failed.error
            result.failedAt = failed.time
        }
        return result
    }

    /// Before the first atomic run has made DEST, its state (and lock) is already in the store
    /// beside it: the pid holding that lock, read as ``lockHolder(stateFolder:)`` reads it.
    static func firstRunHolder(_ destinationPath: String) -> Int? {
        guard let identity = try? DestinationIdentity.resolve(destinationPath) else { return nil }
        let fd = open(identity.storePath + "/" + Destination.stateFolderName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        let state = FileDescriptor(fd: fd, displayPath: identity.storePath)
        defer { state.close() }
        return lockHolder(stateFolder: state)
    }

    /// The pid holding an exclusive `flock` on `DEST/.mirror/lock`, read from `/proc/locks`
    /// (`N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF`, device numbers in hex). Reading it
    /// takes no lock, so it cannot delay or refuse a sync the way a test-lock with `flock` could.
    /// A line counts when its inode is the lock file's and either its device is too or its pid is
    /// the one the holder wrote into the file (on overlay filesystems `/proc/locks` names the
    /// underlying device, not the one `stat` reports). nil when nobody holds it or `/proc` is absent.
    static func lockHolder(stateFolder: FileDescriptor) -> Int? {
        var st = stat()
        guard fstatat(stateFolder.fd, "lock", &st, AT_SYMLINK_NOFOLLOW) == 0,
              let text = try? String(contentsOfFile: "/proc/locks", encoding: .utf8) else { return nil }
        // gnu_dev_major / gnu_dev_minor.
        let device = UInt64(st.st_dev)
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & 0xffff_f000)
        let minor = (device & 0xff) | ((device >> 12) & 0xffff_ff00)
        var written: Int?
        let fd = openat(stateFolder.fd, "lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        if fd >= 0 {
            let file = FileDescriptor(fd: fd, displayPath: "lock")
            written = (try? file.readAll()).flatMap { Int(String(decoding: $0, as: UTF8.self).trimmingSpaces) }
            file.close()
        }
        for line in text.split(separator: "\n") {
            // A blocked waiter is listed as `N: -> FLOCK ...`; only the holder counts.
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1] == "FLOCK", fields[3] == "WRITE", let pid = Int(fields[4]) else { continue }
            let id = fields[5].split(separator: ":")
            guard id.count == 3, UInt64(id[2]) == UInt64(st.st_ino) else { continue }
            let sameDevice = UInt64(id[0], radix: 16) == major && UInt64(id[1], radix: 16) == minor
            if sameDevice || pid == written { return pid }
        }
        return nil
    }
}
