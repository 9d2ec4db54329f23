/// The state of one entry that needs bytes from the network: which source is next, how many
/// attempts failed, when the next may start.
final class EntryTask {
    let entry: ManifestEntry
    let sources: [String]
    /// A different file is at the path; it stays until the new copy verifies.
    let replacing: Bool
    /// From the plan: durable bytes of an earlier run and the record describing them.
    let resume: PartialRecord?
    let resumeOffset: Int64

    var partial: PartialFile?
    /// The requests running for this entry: one, or one per open segment.
    var downloads: [Download] = []
    /// A segment failed; the other segments are being stopped, then the entry retries as a whole.
    var segmentFailure: TransferFailure?
    /// The source does not serve ranges reliably: no segments for this entry in this run.
    var noSegments = false
    /// Segment requests this entry may run at once: starts at one and grows towards `--segments`
    /// while the hash waits for bytes (see ``SyncRunner``'s `widenSegments`).
    var segmentWidth = 1
    /// When the width was last decided, and the hash thread's idle seconds then.
    var widthDecidedAt: (time: Double, idle: Double)?
    var sourceIndex = 0
    var failuresWithoutProgress = 0
    var checksumFailures = 0
    var attempts = 0
    /// The next attempt asks for the whole file (the source's ranges are not to be trusted).
    var fromZero = false
    /// Monotonic time before which the next attempt must not start (back-off, `Retry-After`).
    var notBefore = 0.0
    var lengthAtAttemptStart: Int64 = 0
    var lastFailure: TransferFailure?
    /// Whether no failure so far said anything against the sources' content (a 404, a wrong
    /// length, wrong bytes): with a last failure of "cannot reach the server", the entry stopped
    /// only because the network or the server went away (exit 75 rather than 1).
    var onlyUnreachable = true
    /// The digest each source gave when its bytes were not the manifest's, by source URL: the same
    /// wrong digest twice from one source means it holds other content, not a damaged copy.
    var wrongDigests: [String: String] = [:]
    /// Source URLs that gave wrong bytes: every later attempt at them asks caches to revalidate
    /// (``MismatchPolicy``, ``CacheRevalidation``).
    var revalidating: Set<String> = []
    /// A source was skipped because its host stopped answering earlier in this run.
    var skippedUnreachable = false

    init(entry: ManifestEntry, sources: [String], replacing: Bool, resume: PartialRecord? = nil, resumeOffset: Int64 = 0) {
        self.entry = entry
        self.sources = sources
        self.replacing = replacing
        self.resume = resume
        self.resumeOffset = resumeOffset
    }

    var currentSource: String? { sourceIndex < sources.count ? sources[sourceIndex] : nil }

    /// Moves on to the next source; false when none is left.
    func advanceSource() -> Bool {
        sourceIndex += 1
        failuresWithoutProgress = 0
        return sourceIndex < sources.count
    }
}
