@testable import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Segmented downloads: ranges written out of order into one preallocated file, hashed in file
/// order, checkpointed per segment, resumed per segment, and turned back into one stream.
@Suite struct SegmentedPartialFileTests {
    let fx: PartialFolder
    var dir: TemporaryDirectory { fx.dir }
    var folder: FileDescriptor { fx.folder }
    var journal: Journal { fx.journal }

    init() throws { fx = try PartialFolder() }

    static let content = TestData.bytes(count: 12 << 20, seed: 91)
    static let identity = EntryIdentity(path: "big.bin", size: Int64(content.count),
                                        digests: [.sha256: TestData.sha256(of: content),
                                                  .sha512: Hasher.digest(.sha512, of: content).hex])

    func partial(writer: PartialWriter? = nil, saved: PartialRecord? = nil) throws -> PartialFile {
        let file = try PartialFile(identity: Self.identity, folder: folder, folderDisplay: dir.path, journal: JournalWriter(journal),
                                   writer: writer, resumeFrom: saved?.durableBytes ?? 0, saved: saved)
        file.sourceURL = "http://127.0.0.1/big.bin"
        return file
    }

    /// Writes `count` bytes of segment `index` from where it stands, in pieces of `piece` bytes.
    func feed(_ file: PartialFile, segment index: Int, count: Int, piece: Int = 300_007) throws {
        var left = count
        while left > 0 {
            guard let open = file.openSegments().first(where: { $0.index == index }) else { return }
            let n = min(piece, left, Int(open.end - open.from))
            let start = Int(open.from)
            try Self.content[start..<(start + n)].withUnsafeBytes { try file.append($0, segment: index) }
            left -= n
        }
    }

    func segmentLength(_ file: PartialFile, _ index: Int) -> Int {
        file.openSegments().first { $0.index == index }.map { Int($0.end - $0.from) } ?? 0
    }

    @Test func segmentsWrittenOutOfOrderHashInFileOrder() throws {
        let file = try partial()
        try file.beginSegments(count: 3)
        #expect(file.isSegmented)
        #expect(file.openSegments().map(\.from) == [0, 4 << 20, 8 << 20])
        // The last segment first, then the middle, then the first: nothing is hashable until
        // the first segment is in, then everything is.
        try feed(file, segment: 2, count: 4 << 20)
        try feed(file, segment: 1, count: 1 << 20)
        try feed(file, segment: 0, count: 4 << 20)
        try feed(file, segment: 1, count: 3 << 20)
        #expect(file.isComplete)
        let digests = try file.finishDigests()
        #expect(digests[.sha256]?.hex == Self.identity.digests[.sha256])
        #expect(digests[.sha512]?.hex == Self.identity.digests[.sha512])
        #expect(TestData.sha256(of: Array(try file.file.readAll())) == Self.identity.digests[.sha256])
    }

    @Test func theWriterThreadHashesInterleavedSegmentsCorrectly() throws {
        let writer = PartialWriter()
        defer { writer.shutdown() }
        let file = try partial(writer: writer)
        try file.beginSegments(count: 4)
        // Round-robin, as four connections deliver.
        while !file.isComplete {
            for index in 0..<4 { try feed(file, segment: index, count: 65_536, piece: 16_411) }
        }
        #expect(try file.finishDigests()[.sha256]?.hex == Self.identity.digests[.sha256])
        #expect(TestData.sha256(of: Array(try file.file.readAll())) == Self.identity.digests[.sha256])
    }

    @Test func aCheckpointRecordsEverySegmentAndAResumeContinuesEach() throws {
        let first = try partial()
        try first.beginSegments(count: 3)
        try feed(first, segment: 0, count: 3 << 20)
        try feed(first, segment: 1, count: 2 << 20)
        try feed(first, segment: 2, count: 3 << 20 + 5)  // 8 MiB in all: a checkpoint
        let record = try #require(journal.records(for: "big.bin")?.partial)
        let segments = try #require(record.segments)
        let done: [Int64] = [3 << 20, 2 << 20, (3 << 20) + 5]
        #expect(segments.map(\.done) == done)
        #expect(record.bytes == 3 << 20, "the hash state covers the contiguous prefix")
        first.close()

        let reread = try Journal(folder: folder, displayPath: "journal", readOnly: true)
        #expect(reread.records(for: "big.bin")?.partial == record, "the segments survive the journal's text form")
        let resumed = try partial(saved: record)
        #expect(resumed.isSegmented)
        #expect(resumed.resumedFromSavedState)
        #expect(resumed.length == record.durableBytes)
        let expected: [Int64] = [3 << 20, 6 << 20, (11 << 20) + 5]
        #expect(resumed.openSegments().map(\.from) == expected)
        for index in [2, 1, 0] { try feed(resumed, segment: index, count: 4 << 20) }
        #expect(resumed.isComplete)
        #expect(try resumed.finishDigests()[.sha256]?.hex == Self.identity.digests[.sha256])
    }

    /// A run killed after a checkpoint had written past each segment's durable part (wrong bytes
    /// there, as a power cut may leave): the saved state is restored all the same, each segment
    /// resumes at its durable end and writes over what lies past it, and the file ends correct.
    @Test func aKillPastTheCheckpointResumesEachSegmentFromTheSavedState() throws {
        let first = try partial()
        try first.beginSegments(count: 3)
        try feed(first, segment: 0, count: 3 << 20)
        try feed(first, segment: 1, count: 2 << 20)
        try feed(first, segment: 2, count: 3 << 20 + 5)  // 8 MiB in all: a checkpoint
        let record = try #require(journal.records(for: "big.bin")?.partial)
        let checkpointed = try #require(record.fileChangeTime)
        try FileClock.waitUntilPast(timespec(tv_sec: Int(checkpointed.seconds), tv_nsec: Int(checkpointed.nanoseconds)))
        let junk = [UInt8](repeating: 0x5A, count: 64 << 10)
        for offset: Int64 in [3 << 20, 6 << 20, (11 << 20) + 5] {
            try junk.withUnsafeBytes { try first.file.write($0, at: offset) }
        }
        #expect(try first.file.stat().ctime != record.fileChangeTime)
        first.close()

        let resumed = try partial(saved: record)
        #expect(resumed.resumedFromSavedState)
        #expect(resumed.keptAtResume == record.durableBytes)
        #expect(resumed.rehashedAtResume == record.durableBytes - record.bytes, "only what the state does not cover is read")
        #expect(resumed.openSegments().map(\.from) == [3 << 20, 6 << 20, (11 << 20) + 5])
        for index in [2, 1, 0] { try feed(resumed, segment: index, count: 4 << 20) }
        #expect(try resumed.finishDigests()[.sha256]?.hex == Self.identity.digests[.sha256])
        #expect(TestData.sha256(of: Array(try resumed.file.readAll())) == Self.identity.digests[.sha256])
    }

    @Test func aResumeTrimsSegmentsTheFileNoLongerHoldsAndRecordsThat() throws {
        let first = try partial()
        try first.beginSegments(count: 3)
        for index in 0..<3 { try feed(first, segment: index, count: 3 << 20) }
        let record = try #require(journal.records(for: "big.bin")?.partial)
        first.close()
        // Something cut the file inside the second segment (a crash before the data was durable
        // cannot do this, but a person can).
        #expect(truncate(dir.path + "/" + PartialFile.name(for: "big.bin"), off_t(5 << 20)) == 0)

        let resumed = try partial(saved: record)
        #expect(resumed.openSegments().map(\.from) == [3 << 20, 5 << 20, 8 << 20])
        let now = try #require(journal.records(for: "big.bin")?.partial?.segments)
        #expect(now.map(\.done) == [3 << 20, 1 << 20, 0], "the journal no longer vouches for the lost bytes")
        for index in 0..<3 { try feed(resumed, segment: index, count: 4 << 20) }
        #expect(try resumed.finishDigests()[.sha256]?.hex == Self.identity.digests[.sha256])
    }

    @Test func abandoningSegmentsContinuesAsOneStreamFromTheContiguousPrefix() throws {
        let file = try partial()
        try file.beginSegments(count: 3)
        try feed(file, segment: 0, count: 4 << 20)
        try feed(file, segment: 1, count: 1 << 20)
        try feed(file, segment: 2, count: 3 << 20)  // checkpoint with all three segments
        #expect(journal.records(for: "big.bin")?.partial?.segments != nil)
        file.abandonSegments()
        #expect(!file.isSegmented)
        #expect(file.length == 5 << 20)
        let record = try #require(journal.records(for: "big.bin")?.partial)
        #expect(record.segments == nil && record.bytes == 5 << 20, "re-recorded as one stream")
        try Self.content[(5 << 20)...].withUnsafeBytes { try file.append($0) }
        #expect(try file.finishDigests()[.sha256]?.hex == Self.identity.digests[.sha256])
    }

    @Test func aSegmentTakesNoMoreThanItsRange() throws {
        let file = try partial()
        try file.beginSegments(count: 3)
        #expect(file.segmentRemaining(0) == 4 << 20)
        #expect(file.segmentRemaining(7) == 0)
        try feed(file, segment: 0, count: 5 << 20)  // the helper stops at the segment's end
        #expect(file.segmentRemaining(0) == 0)
        #expect(file.length == 4 << 20)
    }

    @Test func malformedSegmentListsAreTornRecords() {
        let id = EntryIdentity(path: "a", size: 100, digests: [.sha256: String(repeating: "0", count: 64)])
        func line(_ segs: String) -> JournalRecord? {
            var record = PartialRecord(identity: id, url: "u", validator: nil, bytes: 0,
                                       segments: [SegmentRecord(start: 0, end: 100, done: 0)])
            let good = JournalRecord.partial(record).encodedLine()
            record.segments = nil
            // Re-encode with a hand-written list (and a valid checksum), then decode.
            var text = String(decoding: good, as: UTF8.self)
            text = text.replacingOccurrences(of: "segs=0:100:0", with: "segs=" + segs)
            let body = Array(text.dropFirst(9).dropLast().utf8)
            let fixed = JournalRecord.hex8(JournalRecord.checksum(body)) + " " + String(decoding: body, as: UTF8.self)
            return JournalRecord.decode(Array(fixed.utf8)[...])
        }
        #expect(line("0:50:10,50:100:50") != nil)
        #expect(line("0:50:10,60:100:0") == nil, "a gap")
        #expect(line("0:50:10,40:100:0") == nil, "an overlap")
        #expect(line("0:50:10") == nil, "does not reach the end")
        #expect(line("0:50:60,50:100:0") == nil, "more done than the segment holds")
        #expect(line("0:50:10,50:200:0") == nil, "past the file's size")
    }
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        var out = ""
        var rest = Substring(self)
        while let range = rest.range(of: target) {
            out += rest[..<range.lowerBound] + replacement
            rest = rest[range.upperBound...]
        }
        return out + rest
    }
}
