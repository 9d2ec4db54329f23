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
        get { locked { spreadingSources } }
        set { locked { spreadingSources = newValue } }
    }

    /// Where some of a segment's bytes came from: the request's first offset and its URL
    /// (credentials masked).
    struct Origin: Equatable {
        let from: Int64
        let source: String
    }

    /// The piece the writer found wrong, if any (the file's requests stop at their next byte).
    var wrongPiece: PieceCheck.WrongPiece? {
        errorLock.lock()
        defer { errorLock.unlock() }
        return storedWrongPiece
    }

    /// Throws the writer's failure, or the wrong piece it found: one lock for both, taken for
    /// every piece of a body (``append(_:segment:)``).
    func throwIfStopped() throws {
        errorLock.lock()
        let (error, wrong) = (storedError, storedWrongPiece)
        errorLock.unlock()
        if let error { throw error }
        if let wrong { throw wrong }
    }

    func clearWrongPiece() {
        errorLock.lock()
        storedWrongPiece = nil
        errorLock.unlock()
    }

    /// A request from `url` writes segment `index` (0 for one stream) from `offset` on.
    func noteOrigin(segment index: Int, from offset: Int64, url: String) {
        let source = redactedURL(url)
        locked {
            guard segments.indices.contains(index), segments[index].origins.last?.source != source else { return }
            segments[index].origins.append(Origin(from: offset, source: source))
        }
    }

    /// The sources (credentials masked) that wrote any byte of `range`.
    func sources(of range: Range<Int64>) -> Set<String> {
        locked {
            var found: Set<String> = []
            for segment in segments where segment.start < range.upperBound && segment.next > range.lowerBound {
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
        writer?.drain(self)
        let start = piece.lowerBound
        return locked {
            let before = acceptedLength
            for i in segments.indices {
                var segment = segments[i]
                var keep = segment.next
                if segment.start < piece.upperBound && segment.end > start { keep = min(keep, max(segment.start, start)) }
                for (k, origin) in segment.origins.enumerated() where dropped.contains(origin.source) {
                    let end = segment.origins[safe: k + 1]?.from ?? segment.next
                    if end > start { keep = min(keep, max(origin.from, start, segment.start)) }
                }
                segment.written = keep - segment.start
                segment.writebackStarted = min(segment.writebackStarted, keep)
                segment.origins.removeAll { $0.from >= keep }
                segments[i] = segment
            }
            acceptedLength = segments.reduce(0) { $0 + $1.written }
            feed = HashFeed(fed: start)
            pieceCheck?.restart(at: start)
            clearWrongPiece()
            lastCheckpoint = -1
            checkpointLocked()
            return before - acceptedLength
        }
    }

    /// The validator held for `url`: that mirror's own when the file's segments come from several
    /// (``spreadsSources``), else the one validator of the bytes held.
    func heldValidator(for url: String) -> String? {
        locked { spreadingSources ? mirrorValidators[redactedURL(url)] : currentValidator }
    }

    /// A response from `url` was accepted with `validator`.
    func adopt(url: String, validator: String?) {
        locked {
            currentSourceURL = url
            if spreadingSources {
                if let validator { mirrorValidators[redactedURL(url)] = validator }
            } else {
                currentValidator = validator ?? currentValidator
            }
        }
    }

    /// The segment as the journal records it: with the source of its latest bytes and that
    /// mirror's validator when the file's segments come from several mirrors.
    func journalRecord(of segment: Segment) -> SegmentRecord {
        var record = segment.record
        if spreadingSources, let origin = segment.origins.last {
            record.source = SegmentSource(url: origin.source, validator: mirrorValidators[origin.source])
        }
        return record
    }

    /// Feeds the hash everything written and waits for it: the wrong piece, if the file has one.
    func checkPieces() -> PieceCheck.WrongPiece? {
        locked { feedFromFile(all: true) }
        writer?.drain(self)
        return wrongPiece
    }

    /// Where the bytes a resume keeps came from: each segment's recorded source (a file whose
    /// segments came from several mirrors, whose validators come back with them), else the
    /// record's one URL. Called with `lock` held, from the resume.
    func restoreOrigins(_ recorded: [SegmentRecord]?, url: String) {
        for i in segments.indices where segments[i].written > 0 {
            let source = recorded?[safe: i]?.source
            segments[i].origins = [Origin(from: segments[i].start, source: source?.url ?? url)]
            if let source {
                spreadingSources = true
                if let validator = source.validator { mirrorValidators[source.url] = validator }
            }
        }
    }

    /// The source recorded for segment `index` (credentials masked), to continue it there.
    func recordedSource(of index: Int) -> String? {
        locked { segments[safe: index]?.origins.last?.source }
    }
}
