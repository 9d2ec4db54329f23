import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState

/// How a `mirror sync` run behaves (its command-line options, parsed).
public struct SyncOptions: Sendable {
    /// The manifest's path or name, as given (its folder anchors a relative `destination`).
    public var manifestPath: String
    /// `--dest`: wins over the manifest's `destination`.
    public var destination: String?
    /// `--jobs`: files in flight (``ConnectionPolicy``).
    public var jobs = ConnectionPolicy.defaultFilesInFlight
    /// `--connections`: connections to one host, all transfer threads together.
    public var connections = ConnectionPolicy.defaultConnections
    /// `--segments`: connections for one large file (1: never split).
    public var segments = ConnectionPolicy.defaultSegments
    /// `--transfer-threads`: transfer threads (``TransferPool``); nil: ``defaultTransferThreads``.
    public var transferThreads: Int?
    /// One per two cores (the other core of each pair hashes), at most one per file in flight.
    public var defaultTransferThreads: Int { min(max(1, jobs), max(1, WorkerPool.coreCount / 2)) }
    /// What counts against `--jobs`, `--connections` and `--segments`, and each transfer thread's share.
    public var connectionPolicy: ConnectionPolicy {
        ConnectionPolicy(filesInFlight: jobs, connectionsPerHost: connections, segments: segments,
                         threadsWanted: transferThreads ?? defaultTransferThreads)
    }
    /// `--segments-above`: files at least this large are split into segments.
    public var segmentThreshold: Int64 = 64 << 20
    public var dryRun = false
    /// `--itemize`, with `--dry-run`: the plan as ``ItemizedChange`` lines.
    public var itemize = false
    /// `--delete` or `--delete-unlisted`; nil: nothing is ever deleted.
    public var deletion: DeletionMode?
    /// `--max-delete`.
    public var deletionPolicy = DeletionPolicy()
    /// `--include`, `--exclude`, `--filter-from`: the entries this machine syncs (``PathFilter``);
    /// nil: all of them. A path the filter leaves out is neither fetched nor deleted.
    public var filter: PathFilter?
    /// `--delete-excluded`: files mirror installed at paths the filter leaves out are deleted too.
    public var deleteExcluded = false
    /// `--atomic`: publish the set whole, as a new generation (``GenerationStore``). A DEST that
    /// already is atomic is synced atomically without it.
    public var atomic = false
    /// `--seed DIR`: folders whose files may hold entries' bytes (``ContentIndex``).
    public var seeds: [String] = []
    /// `--keep`: complete generations kept.
    public var keepGenerations = 2
    /// `--wait`: wait for another run's lock instead of exiting 75.
    public var waitForLock = false
    /// `--deadline`: seconds after the start at which the run stops cleanly, state saved.
    public var deadline: Double?
    /// `--limit-rate`: bytes per second for the whole run, or a timetable of them (``RateSchedule``).
    public var limitRate: RateSchedule?
    public var transfer = TransferSettings()
    /// `--prefer`: bases asked first for every entry (a site cache, a neighbour), before the manifest's sources.
    public var sourceOrder = SourceOrder()
    /// Full downloads whose checksum may fail before the entry fails.
    public var checksumAttempts = 3
    /// Consecutive failed attempts without progress on one source before the next source is tried.
    public var retries = 5
    /// Back-off before the first retry; doubles with each further failure (capped at 60 s).
    public var retryBaseDelay = 1.0
    /// Set by the session once the manifest's signature verified (`--trust`): the SHA-256 of the
    /// bytes verified. The run then holds the manifest to the serial DEST accepted last
    /// (``SerialPolicy``) as soon as it holds DEST's lock, before anything is fetched or changed.
    public var signedManifestSHA256: String?

    public init(manifestPath: String) {
        self.manifestPath = manifestPath
    }
}

extension SyncOptions {
    /// The settings of one request at `url` (the run's, ``EntryWork/transferSettings(for:url:manifestSources:)``,
    /// and the dry run's for a chunk index): `revalidate` asks caches to revalidate; a `--prefer`
    /// URL does not get the `--auth-header-env` header, which is meant for the manifest's sources;
    /// and netrc credentials go only to the origins of `manifestSources` and of the manifest URL
    /// (``CredentialScope``; docs/fleet.md).
    func transferSettings(url: String, revalidate: Bool, manifestSources: @autoclosure () -> [String]) -> TransferSettings {
        var settings = transfer
        settings.revalidate = revalidate
        let preferred = sourceOrder.isPreferred(url)
        // Most requests of a run need neither: no URL is resolved for them.
        guard preferred || settings.security.netrc != nil else { return settings }
        let named = manifestSources()
        if preferred && !named.contains(url) { settings.security.authorization = nil }
        if settings.security.netrc != nil { settings.security.manifestSources = named }
        return settings
    }
}

/// A failure of the whole run, before or outside any single entry.
public enum SyncError: Error, CustomStringConvertible {
    case manifest(ManifestError)
    /// Neither `--dest` nor the manifest's `destination` says where the files go.
    case noDestination(manifest: String)
    /// DEST (or its `.mirror` state) cannot be created or written.
    case destination(SystemError)
    /// Another run holds the lock.
    case locked(DestinationLock.Failure)
    /// libcurl could not be set up.
    case setup(String)
    /// The files to fetch do not fit on DEST's file system (``SpaceCheck``), found before any request.
    case noSpace(destination: String, needed: Int64, free: Int64)
    /// A plain DEST's first `--atomic` run found files mirror did not install and the manifest
    /// does not list (``ConversionCheck``): a few of their paths (escaped for a terminal) and how
    /// many there are. Nothing under DEST changed.
    case conversionRefused(destination: String, paths: [String], count: Int)
    /// A plain DEST's first `--atomic` run found other destinations inside it (``ConversionCheck``),
    /// which no generation can hold: a few of their folders (escaped) and how many there are.
    /// Refused whatever the options; nothing under DEST changed.
    case conversionOfNested(destination: String, nested: [String], count: Int)
    /// A signed manifest older than, or other than, the one DEST accepted, or past its `expires`
    /// (``SerialPolicy``). Nothing under DEST changed.
    case manifestRefused(manifest: String, SerialPolicy.Refusal)

    public var description: String {
        switch self {
        case .manifest(let e): return e.description
        case .noDestination(let m): return "\(m): no destination: pass --dest DIR, or add `destination:` to the manifest"
        case .destination(let e): return e.description
        case .locked(let f): return f.description
        case .setup(let s): return s
        case .noSpace(let dest, let needed, let free):
            return "not enough space in \(dest): the files to fetch need \(Formatting.bytes(needed)) and its file system has "
                + "\(Formatting.bytes(free)) free; free \(Formatting.bytes(needed - free)) or more and run again (nothing was downloaded)"
        case .conversionRefused(let dest, let paths, let count):
            let more = count > paths.count ? " and \(count - paths.count) more" : ""
            let files = count == 1 ? "a file" : "\(count) files"
            return "\(dest) was not made atomic: it holds \(files) that mirror did not install and the manifest does not list "
                + "(\(paths.joined(separator: ", "))\(more)), which the first generation would drop; move them away, "
                + "or pass --delete-unlisted to let the conversion delete them (nothing was changed)"
        case .manifestRefused(let manifest, let refusal):
            return SerialPolicy.describe(refusal, manifest: manifest)
        case .conversionOfNested(let dest, let nested, let count):
            let more = count > nested.count ? " and \(count - nested.count) more" : ""
            let which = count == 1 ? "another mirror destination" : "\(count) other mirror destinations"
            return "\(dest) was not made atomic: it holds \(which) (\(nested.joined(separator: ", "))\(more)), which no generation "
                + "can hold (each is one manifest's set), and mirror never deletes another destination; move \(count == 1 ? "it" : "them") out of "
                + "\(dest) and run again (nothing was changed)"
        }
    }
}
