import MirrorModel
import MirrorState

/// The state of one entry that needs bytes from the network, in small values with one job each:
/// where it stands among its sources, its attempts, what its failures said, and its segments.
final class EntryTask {
    let entry: ManifestEntry
    /// A different file is at the path; it stays until the new copy verifies.
    let replacing: Bool
    /// From the plan: durable bytes of an earlier run and the record describing them.
    var resume: PartialRecord? { resumeRecord?.value }
    let resumeOffset: Int64
    /// Behind a reference: a record is ~170 bytes inline, and most of 10^6 tasks have none
    /// (docs/performance.md, "A first sync of many files").
    private let resumeRecord: Rare<PartialRecord>?

    var partial: PartialFile?
    /// The requests running for this entry: one, or one per open segment.
    var downloads: [Download] = []
    var source: SourceCursor
    var attempt = Attempts()
    var history = FailureHistory()
    var segments = SegmentState()
    /// Which mirrors the file's segments may still go to (``MirrorSpread``).
    @RareValue var mirrors: MirrorSpread
    /// Where the entry stands in the run (``EntryState``), changed only by ``move(to:)``.
    private(set) var state = EntryState.ready
    /// Monotonic time before which the next attempt must not start (back-off, `Retry-After`; ``Scheduler``).
    var notBefore: Double {
        if case .waiting(let until) = state { return until }
        return 0
    }
    /// The transfer thread its requests go to (``TransferPool``), fixed at its first request.
    var shard: Int?
    /// Installed and counted (``RunTasks/retire(_:)``): nothing of it is needed any more.
    var isRetired: Bool { state == .installed }
    /// Bytes received for this entry in this run: its partial file's, and a chunk delta's index.
    var bytesReceived: Int64 { (partial?.bytesReceived ?? 0) + attempt.delta.indexBytes }
    /// The partial file's name (``PartialFile/name(for:)``, a SHA-256 of the path), worked out
    /// once: the space check, the partial file and the sweep at the end all ask for it.
    lazy var partialName: String = PartialFile.name(for: entry.path)

    init(entry: ManifestEntry, sources: [String], replacing: Bool, resume: PartialRecord? = nil, resumeOffset: Int64 = 0) {
        self.entry = entry
        source = SourceCursor(urls: sources)
        self.replacing = replacing
        resumeRecord = resume.map(Rare.init)
        self.resumeOffset = resumeOffset
    }

    /// Moves the entry on in its life (``EntryState/allows(_:)``); a move the life does not
    /// have is a defect of the run's loop, which debug builds stop at.
    func move(to next: EntryState) {
        assert(state.allows(next), "\(entry.path): no move from \(state) to \(next) in an entry's life (EntryState)")
        state = next
    }

    /// The entry's sources, in the order they are tried (the manifest's URL, then its mirrors).
    var sources: [String] { source.urls }
    var currentSource: String? { source.current }
}

/// The entry's sources, in the order they are tried, and where it stands among them.
struct SourceCursor {
    let urls: [String]
    private(set) var index = 0
    /// Attempts on the current source that made no progress (``RetryPolicy/Facts/failuresWithoutProgress``).
    var failuresWithoutProgress = 0

    var current: String? { index < urls.count ? urls[index] : nil }
    /// Whether a source follows the current one.
    var hasAnother: Bool { urls.indices.contains(index + 1) }

    /// Moves on to the next source; false when none is left. A fresh source starts with no
    /// failures, unless `resetFailures` is false (after wrong bytes, the count carries over).
    mutating func advance(resetFailures: Bool = true) -> Bool {
        index += 1
        if resetFailures { failuresWithoutProgress = 0 }
        return index < urls.count
    }
}

/// The entry's attempts: how many started, and where the current one started.
struct Attempts {
    var count = 0
    /// The partial file's length when the current attempt started (its progress is measured from here).
    var lengthAtStart: Int64 = 0
    /// The next attempt asks for the whole file (the source's ranges are not to be trusted).
    var fromZero = false
    /// A whole file offered for a resume was declined (the manifest changed under the run): its
    /// cancelled transfer is handled as a refused resume (``EntryWork/restartFromZero(_:)``).
    var wholeFileDeclined = false
    /// A copy of a local file with the entry's content was tried (``ContentIndex``): once only.
    var triedLocalCopy = false
    /// The file at the entry's path holds its bytes but may not stay (``FoundFilePolicy``): the
    /// local copy is made from it, whatever the ``ContentIndex`` knows.
    var copyFound = false
    /// The file found at the entry's path, copied from, is one mirror installed
    /// (``Installer/isMirrors(_:at:)``): the copy is journaled as an install, not `found=1`.
    var foundIsMirrors = false
    /// The local file the partial file was copied from, when it was (for the output).
    var copiedFrom: String?
    /// A chunk delta from an older copy (``EntryWork/startDelta(_:url:)``): tried once (~110
    /// bytes inline, unused by most tasks, so kept behind a reference).
    @RareValue var delta: DeltaAttempt

    mutating func begin(at length: Int64) {
        count += 1
        lengthAtStart = length
    }
}

/// What the entry's failures so far said: the message and the exit status when it gives up.
struct FailureHistory {
    /// The latest failure (behind a reference: ~56 bytes inline, and most entries never fail).
    private(set) var last: TransferFailure? {
        get { lastFailure?.value }
        set { lastFailure = newValue.map(Rare.init) }
    }
    private var lastFailure: Rare<TransferFailure>?
    /// Whether no failure so far said anything against the sources' content (a 404, a wrong
    /// length, wrong bytes): with a last failure of "cannot reach the server", the entry stopped
    /// only because the network or the server went away (exit 75 rather than 1).
    private(set) var onlyUnreachable = true
    /// A source was skipped because its host stopped answering earlier in this run.
    private(set) var skippedUnreachable = false
    /// Downloads whose bytes were not the manifest's.
    private(set) var checksumFailures = 0
    /// The digest each source gave when its bytes were not the manifest's, by source URL: the same
    /// wrong digest twice from one source means it holds other content, not a damaged copy.
    private var wrongDigests: [String: String] = [:]
    /// Source URLs that gave wrong bytes: every later attempt at them asks caches to revalidate
    /// (``MismatchPolicy``, ``CacheRevalidation``).
    private(set) var revalidating: Set<String> = []

    mutating func revalidate(_ url: String) { revalidating.insert(url) }

    /// A failed attempt. A reset or a timeout on the way to a dead server says nothing against
    /// the server's content; a 404, a wrong length or wrong bytes do (docs/faults.md, network lost mid-run).
    mutating func record(_ failure: TransferFailure) {
        last = failure
        if !failure.isTransient { onlyUnreachable = false }
    }

    /// A source not asked because its host stopped answering earlier in this run.
    mutating func skipped(_ failure: TransferFailure) {
        last = failure
        skippedUnreachable = true
    }

    /// A complete download whose bytes were not the manifest's (`detail` says expected and got).
    /// - Returns: whether `source` gave the same wrong digest before (it holds other content).
    mutating func wrongBytes(from source: String, digest: String, detail: String) -> Bool {
        checksumFailures += 1
        onlyUnreachable = false
        last = .checksumMismatch(detail)
        defer { wrongDigests[source] = digest }
        return wrongDigests[source] == digest
    }

    /// Whether the entry stopped only because no source could be reached.
    var endedUnreachable: Bool { onlyUnreachable && last?.isUnreachable == true }
}

/// The runner's side of a segmented download: how many requests the file may run, and how a
/// failed segment ends the others.
struct SegmentState {
    /// A segment failed; the other segments are being stopped, then the entry retries as a whole.
    private(set) var failure: TransferFailure? {
        get { firstFailure?.value }
        set { firstFailure = newValue.map(Rare.init) }
    }
    private var firstFailure: Rare<TransferFailure>?
    /// The source does not serve ranges reliably: no segments for this entry in this run.
    var refused = false
    /// Segment requests this entry may run at once: starts at one and grows towards `--segments`
    /// while the hash waits for bytes (see ``SyncRunner``'s `widenSegments`).
    var width = 1
    /// When the width was last decided, and the hash thread's idle seconds then.
    var widthDecidedAt: (time: Double, idle: Double, transferIdle: Double)?

    /// The first failure of a segment stands; later ones are its consequences.
    mutating func fail(_ failure: TransferFailure) {
        if self.failure == nil { self.failure = failure }
    }

    /// The failure to handle once every segment is back, cleared.
    mutating func takeFailure() -> TransferFailure? {
        defer { failure = nil }
        return failure
    }
}

/// A value most tasks do not have, kept behind one reference so that it costs a task 8 bytes
/// when absent. Owned by one task: ``Attempts`` is never copied to be changed apart.
final class Rare<Value> {
    var value: Value
    init(_ value: Value) { self.value = value }
}

/// A value that starts empty and that most tasks never change.
protocol RarelyUsed {
    init()
    /// Still as made: nothing tried or recorded.
    var isUnused: Bool { get }
}

/// A ``RarelyUsed`` value behind a ``Rare`` reference made at its first change: 8 bytes for a
/// task that never changes it.
@propertyWrapper
struct RareValue<Value: RarelyUsed> {
    private var box: Rare<Value>?

    init() {}

    var wrappedValue: Value {
        get { box?.value ?? Value() }
        set {
            if let box {
                box.value = newValue
            } else if !newValue.isUnused {
                box = Rare(newValue)
            }
        }
    }
}

extension DeltaAttempt: RarelyUsed {}
extension MirrorSpread: RarelyUsed {}
