import MirrorKit

/// The `status --json` object (docs/cli.md, "mirror status"), printed through ``JSONOutput``.
///
/// Errors come from the journal, which may quote a URL: they are masked here with
/// ``redactingURLs(in:)``. Paths and the destination are data and are left as they are; terminal
/// controls in any string are escaped by ``JSONOutput/render(_:)``.
public struct StatusDocument: Codable, Equatable, Sendable {
    /// One count per state, each always present (zero included).
    public struct Files: Codable, Equatable, Sendable {
        public var total: Int
        public var done: Int
        public var partial: Int
        public var failed: Int
        public var unverified: Int
        public var blocked: Int
        public var missing: Int
        /// Entries `--include`/`--exclude` left out; not in `total`.
        public var excluded: Int
    }

    public struct Bytes: Codable, Equatable, Sendable {
        public var total: Int64
        public var done: Int64
        /// Durable bytes of every partial download, of partial and failed entries alike.
        public var partialDownloaded: Int64

        enum CodingKeys: String, CodingKey { case total, done, partialDownloaded = "partial_downloaded" }
    }

    public struct LastRun: Codable, Equatable, Sendable {
        /// RFC 3339, UTC.
        public var start: String
        public var end: String
        public var startUnix: Int64
        public var endUnix: Int64
        public var result: String
        public var downloaded: Int
        public var failed: Int
        public var bytes: Int64
        /// Why the run stopped early or could not write; absent otherwise.
        public var reason: String?
        /// Where its manifest came from (``ManifestSource``); absent in records of older versions.
        public var manifest: String?

        enum CodingKeys: String, CodingKey {
            case start, end, startUnix = "start_unix", endUnix = "end_unix", result, downloaded, failed, bytes, reason, manifest
        }
    }

    /// An entry that is not done; a key whose value does not apply is left out.
    public struct Entry: Codable, Equatable, Sendable {
        public var path: String
        public var state: String
        public var size: Int64
        public var partialBytes: Int64?
        /// Present exactly when `partial_bytes` is (``EntryStatus/percent``).
        public var percent: Double?
        public var error: String?
        /// RFC 3339, UTC.
        public var failedAt: String?

        enum CodingKeys: String, CodingKey {
            case path, state, size, partialBytes = "partial_bytes", percent, error, failedAt = "failed_at"
        }
    }

    public var destination: String
    public var destinationExists: Bool
    public var syncRunning: Bool
    public var syncPid: OrNull<Int>
    public var files: Files
    public var bytes: Bytes
    public var lastRun: OrNull<LastRun>
    /// A run that took DEST's lock and never ended (killed, or the machine stopped), with nothing
    /// running now and no run ended since; null otherwise.
    public var interruptedRun: OrNull<InterruptedRun>
    /// The end of the last run that ended `ok`; null when none is recorded.
    public var lastSuccess: OrNull<MomentDocument>
    /// The manifest this status read: a file, or the copy kept for a URL (``ManifestDocument``).
    public var manifest: OrNull<ManifestDocument>
    /// Every entry that is not done, in manifest order.
    public var entries: [Entry]
    /// An atomic DEST's generations; absent for a plain DEST.
    public var generations: Generations?
    /// The newest signed manifest DEST accepted with `--trust` (docs/signing.md, "Versions");
    /// absent when none carried a serial.
    public var signedManifest: SignedManifest?

    public struct SignedManifest: Codable, Equatable, Sendable {
        public var serial: Int64
        /// RFC 3339, UTC, and Unix seconds; absent when the manifest has no `expires`.
        public var expires: String?
        public var expiresUnix: Int64?

        enum CodingKeys: String, CodingKey {
            case serial, expires, expiresUnix = "expires_unix"
        }
    }

    public struct InterruptedRun: Codable, Equatable, Sendable {
        /// RFC 3339, UTC, and Unix seconds: when it took the lock.
        public var start: String
        public var startUnix: Int64
        public var pid: Int

        enum CodingKeys: String, CodingKey {
            case start, startUnix = "start_unix", pid
        }
    }

    public struct Generations: Codable, Equatable, Sendable {
        /// Oldest first.
        public var kept: [Int]
        public var current: Int
        public var building: Bool
        /// A rollback's hold; absent when none.
        public var hold: HoldDocument?
    }

    enum CodingKeys: String, CodingKey {
        case destination, destinationExists = "destination_exists", syncRunning = "sync_running", syncPid = "sync_pid"
        case files, bytes, lastRun = "last_run", interruptedRun = "interrupted_run", entries, lastSuccess = "last_success"
        case manifest, generations, signedManifest = "signed_manifest"
    }

    public init(_ status: DestinationStatus) {
        self.init(status, entries: status.entries.map(Entry.init))
    }

    /// The document with `entries` as given: ``DestinationStatus/writeJSON(to:)`` passes none and
    /// streams them into the array.
    init(_ status: DestinationStatus, entries: [Entry]) {
        destination = status.destination
        destinationExists = status.destinationExists
        syncRunning = status.runningPid != nil
        syncPid = OrNull(status.runningPid)
        files = Files(total: status.totalFiles, done: status.count(.done), partial: status.count(.partial),
                      failed: status.count(.failed), unverified: status.count(.unverified),
                      blocked: status.count(.blocked), missing: status.count(.missing), excluded: status.excluded)
        bytes = Bytes(total: status.totalBytes, done: status.bytes(.done),
                      partialDownloaded: status.entries.reduce(Int64(0)) { $0 + ($1.partialBytes ?? 0) })
        lastRun = OrNull(status.lastRun.map { run in
            LastRun(start: Formatting.utcTimestamp(run.start), end: Formatting.utcTimestamp(run.end),
                    startUnix: run.start, endUnix: run.end, result: run.result,
                    downloaded: run.downloaded, failed: run.failed, bytes: run.bytes,
                    reason: run.reason.map { redactingURLs(in: $0) }, manifest: run.manifest)
        })
        interruptedRun = OrNull(status.interruptedRun.map {
            InterruptedRun(start: Formatting.utcTimestamp($0.start), startUnix: $0.start, pid: $0.pid)
        })
        lastSuccess = OrNull(status.lastSuccess.map { MomentDocument($0.end) })
        manifest = OrNull(status.manifest.map { ManifestDocument($0, now: currentUnixTime()) })
        self.entries = entries
        generations = status.generations.map { Generations(kept: $0.kept, current: $0.current, building: $0.building,
                                                                    hold: $0.hold.map(HoldDocument.init)) }
        signedManifest = status.acceptedSerial.map {
            SignedManifest(serial: $0.serial, expires: $0.expires.map(Formatting.utcTimestamp), expiresUnix: $0.expires)
        }
    }
}

extension StatusDocument.Entry {
    /// In an extension, so that the memberwise initializer stays.
    init(_ e: EntryStatus) {
        self.init(path: e.path, state: e.state.rawValue, size: e.size, partialBytes: e.partialBytes,
                  percent: e.percent, error: e.error.map { redactingURLs(in: $0) },
                  failedAt: e.failedAt.map(Formatting.utcTimestamp))
    }
}
