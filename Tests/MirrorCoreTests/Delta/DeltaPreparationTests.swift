import Foundation
@testable import MirrorModel
import Testing
@testable import MirrorCore
@testable import MirrorFS

/// ``DeltaPreparation``: the one decision of whether an entry is synced as a chunk delta, which
/// the run lays out and the dry run counts (docs/cli.md, "Chunk deltas", `--dry-run`). The older
/// copy is a real file; the index fetch is a stub that records whether it was asked.
@Suite struct DeltaPreparationTests {
    static let url = "http://h.example/a.img"

    /// A temporary folder holding `old`, and the index of `new` (the standard chunking).
    final class Case {
        let dir: ManifestTempDir
        let oldPath: String
        let entry: ManifestEntry
        let index: ChunkIndex
        let reference: ChunkIndexReference
        var fetches = 0

        /// `digestBytes`: how much of each chunk's digest the index keeps (32: a version-1 index).
        init(old: [UInt8], new: [UInt8], digestBytes: Int = 32) throws {
            dir = try ManifestTempDir()
            oldPath = dir.path + "/old"
            try dir.write(old, to: oldPath)
            try dir.write(new, to: dir.path + "/new")
            let fd = open(dir.path + "/new", O_RDONLY)
            let file = FileDescriptor(fd: fd, displayPath: "new")
            defer { file.close() }
            var chunks: [ChunkIndex.Chunk] = []
            try Chunker(.standard).chunks(of: file, size: Int64(new.count)) { chunks.append(.init(length: $0.length, digest: $0.digest)) }
            let digest = Hasher.digest(.sha256, of: new)
            index = ChunkIndex(parameters: .standard, size: Int64(new.count), fileDigest: ChunkDigest(digest.bytes),
                               digestBytes: digestBytes, chunks: chunks)
            reference = ChunkIndexReference(path: ".mirror-chunks/a.img", size: 4000, sha256: Hasher.digest(.sha256, of: [1]))
            entry = ManifestEntry(path: "a.img", url: .relative("a.img"), size: Int64(new.count), digests: [.sha256: digest],
                                  chunks: reference)
        }

        /// `oldSize`: the size the older copy is said to have (its file's own by default).
        func preparation(hasOld: Bool = true, oldSize: Int64? = nil, fetch: ((ChunkIndexReference) throws -> ChunkIndex)? = nil) -> DeltaPreparation {
            let oldPath = oldPath
            return DeltaPreparation(olderCopy: { _ in
                guard hasOld else { return nil }
                let fd = open(oldPath, O_RDONLY)
                var st = stat()
                fstat(fd, &st)
                return .init(file: FileDescriptor(fd: fd, displayPath: oldPath), size: oldSize ?? Int64(st.st_size),
                             display: oldPath, place: .destination)
            }, fetchIndex: { [self] reference, _ in
                fetches += 1
                return try fetch?(reference) ?? index
            }, stop: { false })
        }
    }

    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] { ChunkerTests.bytes(count, seed: seed) }

    @Test func aDeltaIsTriedOnlyForAnEntryWithAnIndexThatStartsFromNothingOverHTTP() throws {
        let c = try Case(old: Self.bytes(1000, seed: 1), new: Self.bytes(1000, seed: 1))
        #expect(DeltaPolicy.mayTry(c.entry, startsFromZero: true, url: Self.url))
        #expect(DeltaPolicy.mayTry(c.entry, startsFromZero: true, url: "HTTPS://h.example/a.img"))
        #expect(!DeltaPolicy.mayTry(c.entry, startsFromZero: false, url: Self.url), "a resume continues its own partial file")
        #expect(!DeltaPolicy.mayTry(c.entry, startsFromZero: true, url: "file:///srv/a.img"), "a file: source is read whole")
        let plain = ManifestEntry(path: "a.img", url: .relative("a.img"), size: 1000, digests: c.entry.digests)
        #expect(!DeltaPolicy.mayTry(plain, startsFromZero: true, url: Self.url), "no chunk index")
        let empty = ManifestEntry(path: "a.img", url: .relative("a.img"), size: 0, digests: c.entry.digests, chunks: c.reference)
        #expect(!DeltaPolicy.mayTry(empty, startsFromZero: true, url: Self.url))
    }

    /// A 4 KiB edit of a 1 MiB file: a delta whose cost is its changed range and its index.
    @Test func aSmallEditIsADeltaThatCostsItsRangesAndItsIndex() throws {
        let old = Self.bytes(1 << 20, seed: 2)
        var new = old
        new.replaceSubrange(500_000 ..< 504_096, with: Self.bytes(4096, seed: 40))
        let c = try Case(old: old, new: new)
        guard case .delta(let layout) = c.preparation().prepare(c.entry, startsFromZero: true, url: Self.url) else {
            Issue.record("no delta")
            return
        }
        defer { layout.old.file.close() }
        #expect(layout.indexBytes == 4000 && layout.old.place == .destination)
        #expect(layout.fetchedBytes == layout.plan.remoteBytes + 4000)
        #expect(layout.plan.remoteBytes >= 4096 && layout.plan.remoteBytes < 1 << 19, "\(layout.plan.remoteBytes)")
    }

    @Test func withoutAnOlderCopyNothingIsTriedNorFetched() throws {
        let c = try Case(old: [], new: Self.bytes(1 << 20, seed: 4))
        guard case .notTried = c.preparation(hasOld: false).prepare(c.entry, startsFromZero: true, url: Self.url) else {
            Issue.record("tried")
            return
        }
        guard case .notTried = c.preparation().prepare(c.entry, startsFromZero: false, url: Self.url) else {
            Issue.record("tried for a resume")
            return
        }
        #expect(c.fetches == 0)
    }

    @Test func anOlderCopyFarLargerIsNoBaseAndNoIndexIsFetched() throws {
        let c = try Case(old: Self.bytes(1024, seed: 5), new: Self.bytes(1024, seed: 6))
        let outcome = c.preparation(oldSize: (64 << 20) + (5 << 10)).prepare(c.entry, startsFromZero: true, url: Self.url)
        guard case .whole(.farLarger(let old), let indexBytes) = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(old == c.oldPath && indexBytes == 0 && c.fetches == 0)
    }

    @Test func anIndexThatCannotBeHadCostsOnlyTheDelta() throws {
        let c = try Case(old: Self.bytes(1 << 20, seed: 7), new: Self.bytes(1 << 20, seed: 7))
        let outcome = c.preparation(fetch: { _ in throw DeltaError("chunk index http://h.example/x: HTTP 404") })
            .prepare(c.entry, startsFromZero: true, url: Self.url)
        guard case .whole(.failed(let why), let indexBytes) = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(why == "chunk index http://h.example/x: HTTP 404" && indexBytes == 0)
    }

    /// An old copy that shares nothing with the new version: the index was fetched (and counts),
    /// and the file is downloaded whole.
    @Test func aDeltaThatWouldFetchMostOfTheFileIsNotUsedButItsIndexCounts() throws {
        let c = try Case(old: Self.bytes(1 << 20, seed: 20), new: Self.bytes(1 << 20, seed: 30))
        let outcome = c.preparation().prepare(c.entry, startsFromZero: true, url: Self.url)
        guard case .whole(.notWorthIt, let indexBytes) = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(indexBytes == 4000 && c.fetches == 1)
    }

    /// A version-2 index keeps 8 bytes of each digest: the old copy's chunks are compared by as
    /// many, and found.
    @Test func anIndexOfShortDigestsFindsTheOldChunks() throws {
        let old = Self.bytes(1 << 20, seed: 8)
        var new = old
        new.replaceSubrange(300_000 ..< 304_096, with: Self.bytes(4096, seed: 41))
        let c = try Case(old: old, new: new, digestBytes: 8)
        guard case .delta(let layout) = c.preparation().prepare(c.entry, startsFromZero: true, url: Self.url) else {
            Issue.record("no delta")
            return
        }
        defer { layout.old.file.close() }
        #expect(layout.plan.localBytes > 900_000, "\(layout.plan.localBytes)")
        #expect(layout.plan.remoteBytes >= 4096 && layout.plan.remoteBytes < 1 << 17, "\(layout.plan.remoteBytes)")
    }
}
