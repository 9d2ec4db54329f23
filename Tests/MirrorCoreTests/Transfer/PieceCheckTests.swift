@testable import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport

/// Metalink piece hashes checked as the bytes are hashed: a wrong piece is found, the whole-file
/// hash goes back to its first byte, the mirrors that sent it are named, and the file is rewound
/// to fetch it again (docs/manifest.md, "Metalink 4").
@Suite struct PieceCheckTests {
    static let content = TestData.bytes(count: 12 << 20, seed: 17)
    static let pieceLength: Int64 = 1 << 20

    static func pieces(of bytes: [UInt8], kind: PieceHashes.Kind = .sha256) -> PieceHashes {
        let hashes = stride(from: 0, to: bytes.count, by: Int(pieceLength)).map { start -> [UInt8] in
            let hasher = PieceHasher(kind)!
            bytes[start..<min(bytes.count, start + Int(pieceLength))].withUnsafeBytes { hasher.update($0) }
            return hasher.finish()
        }
        return PieceHashes(kind: kind, length: pieceLength, hashes: hashes)
    }

    static func feed(_ check: PieceCheck, _ bytes: [UInt8], into hashers: HasherSet, step: Int) -> PieceCheck.WrongPiece? {
        var at = 0
        while at < bytes.count {
            let n = min(step, bytes.count - at)
            if let wrong = bytes[at..<(at + n)].withUnsafeBytes({ check.feed($0, into: hashers) }) { return wrong }
            at += n
        }
        return nil
    }

    @Test(arguments: [PieceHashes.Kind.sha1, .sha256, .sha512])
    func rightPiecesPassAndTheWholeDigestIsUnchanged(kind: PieceHashes.Kind) throws {
        let check = try #require(PieceCheck(Self.pieces(of: Self.content, kind: kind), size: Int64(Self.content.count), from: 0))
        let hashers = HasherSet(for: [.sha256: ()])
        #expect(Self.feed(check, Self.content, into: hashers, step: 300_007) == nil)
        #expect(hashers.finalize()[.sha256]?.hex == TestData.sha256(of: Self.content))
    }

    @Test func aWrongPieceRewindsTheWholeHashToItsFirstByte() throws {
        var bad = Self.content
        bad[5 << 20 + 12345] ^= 0xff
        let check = try #require(PieceCheck(Self.pieces(of: Self.content), size: Int64(bad.count), from: 0))
        let hashers = HasherSet(for: [.sha256: ()])
        let wrong = try #require(Self.feed(check, bad, into: hashers, step: 65_536))
        #expect(wrong.index == 5)
        #expect(wrong.range == (5 << 20)..<(6 << 20))
        #expect(check.next == 5 << 20)
        // The hashers stand exactly where a hash of the first five pieces would.
        let prefix = HasherSet(for: [.sha256: ()])
        Self.content[0..<(5 << 20)].withUnsafeBytes { prefix.update($0) }
        #expect(hashers.savedStates() == prefix.savedStates())
        // The piece fetched again, right this time: the rest passes and the digest is the file's.
        #expect(Self.feed(check, Array(Self.content[(5 << 20)...]), into: hashers, step: 100_000) == nil)
        #expect(hashers.finalize()[.sha256]?.hex == TestData.sha256(of: Self.content))
    }

    @Test func aPieceSeenFromItsMiddleIsLeftToTheWholeDigest() throws {
        var bad = Self.content
        bad[100] ^= 1
        // A resume from a saved state at byte 50 cannot check piece 0.
        let check = try #require(PieceCheck(Self.pieces(of: Self.content), size: Int64(bad.count), from: 50))
        let hashers = HasherSet(for: [.sha256: ()])
        #expect(Self.feed(check, Array(bad[50...]), into: hashers, step: 1 << 20) == nil)
    }

    @Test func aSegmentFromAWrongMirrorIsRewoundAndItsMirrorNamed() throws {
        let fx = try PartialFolder()
        var bad = Self.content
        bad[(4 << 20) + 7] ^= 0x55
        let identity = EntryIdentity(path: "big.bin", size: Int64(Self.content.count), digests: [.sha256: TestData.sha256(of: Self.content)])
        let file = try PartialFile(identity: identity, folder: fx.folder, folderDisplay: fx.dir.path, journal: JournalWriter(fx.journal),
                                   pieces: Self.pieces(of: Self.content))
        file.sourceURL = "http://a.example/big.bin"
        try file.beginSegments(count: 3)
        func write(_ bytes: [UInt8], segment: Int, from url: String) throws {
            let open = try #require(file.openSegments().first { $0.index == segment })
            file.noteOrigin(segment: segment, from: open.from, url: url)
            try bytes[Int(open.from)..<Int(open.end)].withUnsafeBytes { try file.append($0, segment: segment) }
        }
        try write(Self.content, segment: 0, from: "http://a.example/big.bin")
        try write(Self.content, segment: 2, from: "http://a.example/big.bin")
        // Segment 1 from the bad mirror: it continues the hashed prefix, so it is hashed as it
        // lands, and its first piece is wrong; the file's next byte from any request is refused.
        try write(bad, segment: 1, from: "http://user:pw@b.example/big.bin")
        #expect(throws: PieceCheck.WrongPiece.self) { try [UInt8(0)].withUnsafeBytes { try file.append($0, segment: 2) } }
        let wrong = try #require(file.wrongPiece)
        #expect(file.sources(of: wrong.range) == ["http://***@b.example/big.bin"])
        file.rewind(piece: wrong.range, dropping: ["http://***@b.example/big.bin"])
        #expect(file.wrongPiece == nil)
        #expect(file.openSegments().map(\.from) == [4 << 20])
        try write(Self.content, segment: 1, from: "http://a.example/big.bin")
        #expect(file.isComplete)
        #expect(try file.finishDigests()[.sha256]?.hex == TestData.sha256(of: Self.content))
        // The rewind was journaled: the record vouches for no byte of the wrong piece.
        let record = try #require(fx.journal.partialRecord(for: "big.bin"))
        #expect(record.segments?[1].done == 0 || record.segments?[1].done == 4 << 20)
    }
}

/// Which mirror each segment goes to (``MirrorSpread``).
@Suite struct MirrorSpreadTests {
    let a = "http://a.example/f", b = "http://b.example/f", c = "http://u:p@c.example/f"

    @Test func segmentsGoRoundTheMirrorsLeastBusyFirst() {
        var spread = MirrorSpread()
        let live = [a, b, c]
        #expect(spread.pick(live: live, recorded: nil, running: []) == a)
        #expect(spread.pick(live: live, recorded: nil, running: []) == b)
        #expect(spread.pick(live: live, recorded: nil, running: []) == c)
        #expect(spread.pick(live: live, recorded: nil, running: [a, b]) == c)
        #expect(spread.pick(live: live, recorded: nil, running: [b, c]) == a)
    }

    @Test func amongTheLeastBusyTheMirrorWhoseRequestEndedLastIsTaken() {
        var spread = MirrorSpread()
        // Served a, b, c, a: c and b have fewest served, but a's connection just came free.
        for _ in 0..<4 { _ = spread.pick(live: [a, b, c], recorded: nil, running: []) }
        spread.lastFreed = a
        #expect(spread.pick(live: [a, b, c], recorded: nil, running: [b, c]) == a)
        // One request at a time, the segments still go round (each mirror is tried early).
        #expect(spread.pick(live: [a, b, c], recorded: nil, running: []) == b)
        // Busier than another, it is not taken: the file widens over the mirrors.
        #expect(spread.pick(live: [a, b, c], recorded: nil, running: [a, b]) == c)
    }

    @Test func aSegmentStaysWithTheMirrorThatSentItsBytesWhileItIsLive() {
        var spread = MirrorSpread()
        #expect(spread.pick(live: [a, b, c], recorded: "http://***@c.example/f", running: [c]) == c)
        #expect(spread.pick(live: [a, b], recorded: "http://***@c.example/f", running: [a]) == b)
    }

    @Test func droppedAndRestingMirrorsAreNotLiveUntilTheirTime() {
        var spread = MirrorSpread()
        spread.drop(["http://***@c.example/f"])
        spread.rest(b)
        #expect(spread.live([a, b, c], givenUp: { _ in false }) == [a])
        #expect(spread.live([a, b, c], givenUp: { $0 == a }) == [])
        spread.wake()
        #expect(spread.live([a, b, c], givenUp: { _ in false }) == [a, b])
        var none = MirrorSpread()
        #expect(none.pick(live: [], recorded: nil, running: []) == nil)
    }

    @Test func eachSegmentsSourceAndValidatorRoundTripThroughTheJournal() throws {
        let identity = EntryIdentity(path: "big.bin", size: 30, digests: [.sha256: String(repeating: "ab", count: 32)])
        let list = [
            SegmentRecord(start: 0, end: 10, done: 10, source: SegmentSource(url: a, validator: "\"a-1\"")),
            SegmentRecord(start: 10, end: 20, done: 3, source: SegmentSource(url: "http://***@c.example/f", validator: "Mon, 07 Dec 2026 10:00:00 GMT")),
            SegmentRecord(start: 20, end: 30, done: 0, source: SegmentSource(url: a, validator: "\"a-1\"")),
        ]
        let record = JournalRecord.partial(PartialRecord(identity: identity, url: a, validator: nil, bytes: 10, segments: list))
        let line = record.encodedLine()
        let text = String(decoding: line, as: UTF8.self)
        #expect(text.contains(" segsrc=0,1,0"), "\(text)")
        #expect(JournalRecord.decode(line.dropLast()[...]) == record, "\(text)")
        // A validator with the list's separators is not kept; a number past the list is malformed.
        #expect(SegmentSource(url: a, validator: "x\ty").validator == nil)
        var broken = list
        #expect(!SegmentRecord.attachSources(list: "\(a)\t", indexes: "0,1,0", to: &broken))
        #expect(!SegmentRecord.attachSources(list: "\(a)\t", indexes: "0,0", to: &broken))
    }
}
