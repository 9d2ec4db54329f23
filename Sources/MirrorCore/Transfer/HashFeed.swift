/// Which written bytes of a partial file go to the hashers, and how: a pure value, facts in and
/// decision out, so the rule is tested without a file or a thread (``PartialFile`` applies it).
///
/// The hashers take the file's bytes in file order, once each. `fed` is the prefix already handed
/// to them (queued on the ``PartialWriter``, or hashed at once without one). A piece written at
/// exactly `fed` is hashed from memory; any other piece waits in the file (the page cache) until
/// the prefix reaches it and is then read back (``FileHashing/read(_:from:to:_:)``). One stream is
/// simply a file with one segment `[0, size)`, so it follows the same rule.
struct HashFeed: Equatable {
    /// Bytes from offset 0 handed to the hashers.
    private(set) var fed: Int64 = 0
    /// A kept prefix is being hashed again from the file (a resume whose saved hash state is not
    /// trusted): the bytes that follow it are read back too, in ``readBackStep`` pieces, instead
    /// of being copied into the writer's buffers, so the transfer never waits behind that read.
    private(set) var readingBack = false

    /// While ``readingBack``, the least that is read back at once (except when asked for all).
    static let readBackStep: Int64 = 4 << 20

    init(fed: Int64 = 0, readingBack: Bool = false) {
        self.fed = fed
        self.readingBack = readingBack
    }

    /// Whether `count` bytes just written at `offset` are hashed from memory now; if so they are fed.
    mutating func takesFromMemory(at offset: Int64, count: Int64) -> Bool {
        guard !readingBack, offset == fed else { return false }
        fed += count
        return true
    }

    /// The written bytes that continue the fed prefix, to be read back from the file and hashed:
    /// across every segment that is complete, up to the written part of the first one that is not.
    /// nil when there are none, or (while ``readingBack``, unless `all`) fewer than ``readBackStep``.
    /// The range returned is fed.
    mutating func readBack(over segments: [PartialFile.Segment], all: Bool) -> Range<Int64>? {
        var end = fed
        for segment in segments where end >= segment.start && end < segment.end {
            end = max(end, segment.next)
            if !segment.isComplete { break }
        }
        guard end > fed, all || !readingBack || end - fed >= HashFeed.readBackStep else { return nil }
        defer { fed = end }
        return fed..<end
    }
}
