import MirrorKit
import MirrorState

/// A file fetched from several mirrors: where each segment's bytes came from, each mirror's
/// validator, and what a wrong piece (``PieceCheck``) undoes (docs/manifest.md, "Metalink 4";
/// docs/journal.md, `srcs` and `segsrc`).
extension PartialFile {
    /// Whether the file's segments come from several mirrors at once (``EntryWork/spreads(_:)``,
    /// or a resumed record that says so): each mirror's validator is then kept apart. Set by the
    /// sync thread before the file's first request; read under the lock by the transfer threads.
    var spreadsSources: Bool {
        get { attempt.withLock { $0.spreadingSources } }
        set { attempt.withLock { $0.spreadingSources = newValue } }
    }

    /// Where some of a segment's bytes came from: the request's first offset and its URL
    /// (credentials masked).
    struct Origin: Equatable {
        let from: Int64
        let source: String
    }

    /// The piece the writer found wrong, if any (the file's requests stop at their next byte).
    var wrongPiece: PieceCheck.WrongPiece? { digest.wrongPiece }

    /// Throws the writer's failure, or the wrong piece it found: one lock for both, taken for
    /// every piece of a body (``append(_:segment:)``).
    func throwIfStopped() throws {
        let stops = digest.stops.withLock { $0 }
        if let error = stops.error { throw error }
        if let wrong = stops.wrongPiece { throw wrong }
    }

    /// A request from `url` writes segment `index` (0 for one stream) from `offset` on.
    func noteOrigin(segment index: Int, from offset: Int64, url: String) {
        let source = redactedURL(url)
        attempt.withLock { state in
            guard state.segments.indices.contains(index), state.segments[index].origins.last?.source != source else { return }
            state.segments[index].origins.append(Origin(from: offset, source: source))
        }
    }

    /// The sources (credentials masked) that wrote any byte of `range`.
    func sources(of range: Range<Int64>) -> Set<String> {
        attempt.withLock { state in
            var found: Set<String> = []
            for segment in state.segments where segment.start < range.upperBound && segment.next > range.lowerBound {
                for (i, origin) in segment.origins.enumerated() {
                    let end = segment.origins[safe: i + 1]?.from ?? segment.next
                    if origin.from < range.upperBound && end > range.lowerBound { found.insert(origin.source) }
                }
            }
            return found
        }
    }

    /// After a wrong `piece`, with every request of the file stopped: each segment keeps only
    /// what it holds before the piece and what no source in `dropped` wrote past the piece's
    /// first byte (bytes before it were checked by their own pieces), the hash goes on from that
    /// byte (the writer rewound the hashers there), and a checkpoint records the smaller file.
    /// Returns the bytes given up.
    @discardableResult
    func rewind(piece: Range<Int64>, dropping dropped: Set<String>) -> Int64 {
        let digest = drained()
        let start = piece.lowerBound
        return attempt.withLock { state in
            let before = state.acceptedLength
            for i in state.segments.indices {
                var segment = state.segments[i]
                var keep = segment.next
                if segment.start < piece.upperBound && segment.end > start { keep = min(keep, max(segment.start, start)) }
                for (k, origin) in segment.origins.enumerated() where dropped.contains(origin.source) {
                    let end = segment.origins[safe: k + 1]?.from ?? segment.next
                    if end > start { keep = min(keep, max(origin.from, start, segment.start)) }
                }
                segment.written = keep - segment.start
                segment.writebackStarted = min(segment.writebackStarted, keep)
                segment.origins.removeAll { $0.from >= keep }
                state.segments[i] = segment
            }
            state.acceptedLength = state.segments.reduce(0) { $0 + $1.written }
            state.feed = HashFeed(fed: start)
            digest.pieceCheck?.restart(at: start)
            digest.stops.withLock { $0.wrongPiece = nil }
            state.lastCheckpoint = -1
            checkpoint(&state)
            return before - state.acceptedLength
        }
    }

    /// The validator held for `url`: that mirror's own when the file's segments come from several
    /// (``spreadsSources``), else the one validator of the bytes held.
    func heldValidator(for url: String) -> String? {
        attempt.withLock { $0.spreadingSources ? $0.mirrorValidators[redactedURL(url)] : $0.validator }
    }

    /// A response from `url` was accepted with `validator`.
    func adopt(url: String, validator: String?) {
        attempt.withLock { state in
            state.sourceURL = url
            if state.spreadingSources {
                if let validator { state.mirrorValidators[redactedURL(url)] = validator }
            } else {
                state.validator = validator ?? state.validator
            }
        }
    }

    /// The segment as the journal records it: with the source of its latest bytes and that
    /// mirror's validator when the file's segments come from several mirrors.
    func journalRecord(of segment: Segment, in state: Attempt) -> SegmentRecord {
        var record = segment.record
        if state.spreadingSources, let origin = segment.origins.last {
            record.source = SegmentSource(url: origin.source, validator: state.mirrorValidators[origin.source])
        }
        return record
    }

    /// Feeds the hash everything written and waits for it: the wrong piece, if the file has one.
    func checkPieces() -> PieceCheck.WrongPiece? {
        attempt.withLock { feedFromFile(&$0, all: true) }
        return drained().wrongPiece
    }

    /// Where the bytes a resume keeps came from: each segment's recorded source (a file whose
    /// segments came from several mirrors, whose validators come back with them), else the
    /// record's one URL. From the resume.
    func restoreOrigins(_ state: inout Attempt, _ recorded: [SegmentRecord]?, url: String) {
        for i in state.segments.indices where state.segments[i].written > 0 {
            let source = recorded?[safe: i]?.source
            state.segments[i].origins = [Origin(from: state.segments[i].start, source: source?.url ?? url)]
            if let source {
                state.spreadingSources = true
                if let validator = source.validator { state.mirrorValidators[source.url] = validator }
            }
        }
    }

    /// The source recorded for segment `index` (credentials masked), to continue it there.
    func recordedSource(of index: Int) -> String? {
        attempt.withLock { $0.segments[safe: index]?.origins.last?.source }
    }
}
