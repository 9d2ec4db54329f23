import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// Choosing verified records by what the packed record holds, before any is decoded: a journal
/// of 10^6 files decoded whole (a `String` per path and digest, a dictionary of them) held
/// 1.2 GB, and two questions asked it of every record: which files the manifest no longer lists
/// (`--delete`, ``records(where:)``), and which verified file holds the bytes an entry needs
/// (reuse by content, `ContentIndex`, through a ``ContentTable``). Each answer is a handful of
/// records (docs/performance.md, "Questions to the whole journal").
extension VerifiedIndex {
    /// Whether the packed record at `at` was written for exactly this size and these digests:
    /// the compare ``EntryIdentity`` makes (a digest kept as text equals no entry's), in place.
    static func holds(_ at: UnsafeRawPointer, size: Int64, digests: DigestSet) -> Bool {
        guard at.loadUnaligned(fromByteOffset: Layout.size, as: Int64.self) == size else { return false }
        var same = true
        digestFields(at) { algorithm, field in
            switch field {
            case .absent: same = digests[algorithm] == nil
            case .raw(let value):
                same = digests[algorithm]?.withUnsafeBytes { bytes in
                    guard let a = value.baseAddress, let b = bytes.baseAddress, bytes.count == value.count else { return false }
                    return memcmp(a, b, value.count) == 0
                } ?? false
            case .text: same = false  // not lowercase hex of the right length: no entry's digest
            }
            return same
        }
        return same
    }

    /// A packed record as it lies in the arena, valid only inside the call it is passed to.
    package struct RecordView {
        let base: UnsafeRawPointer

        /// The path's bytes, as the file system names it.
        package var path: UnsafeBufferPointer<UInt8> { Layout.path(base) }

        var size: Int64 { base.loadUnaligned(fromByteOffset: Layout.size, as: Int64.self) }

        /// Whether the record was written for exactly this size and these digests.
        func holds(size: Int64, digests: DigestSet) -> Bool { VerifiedIndex.holds(base, size: size, digests: digests) }

        /// ``ContentHash`` of the size and digests, or nil when a digest is kept as text (it then
        /// equals no entry's, as its line would not).
        var content: ContentHash? {
            var hasher = ContentHash.start(size: size)
            var text = false
            VerifiedIndex.digestFields(base) { algorithm, field in
                switch field {
                case .absent: break
                case .raw(let value): ContentHash.add(algorithm, value, to: &hasher)
                case .text: text = true
                }
                return !text
            }
            return text ? nil : ContentHash(value: hasher.finalize())
        }
    }

    /// Every latest record with its digests as raw bytes, by ``ContentHash``: 16 bytes a record,
    /// sorted, so a content is found by a binary search and only its records are decoded.
    struct ContentTable {
        fileprivate var hashes: [Int] = []
        fileprivate var offsets: [Int] = []
        /// The index's ``VerifiedIndex/repacks`` when the table was made: its offsets hold only
        /// until the next repack.
        fileprivate(set) var repacks = 0

        /// Arena offsets of the records with this hash (some may hold other contents).
        func offsets(for hash: ContentHash) -> ArraySlice<Int> {
            var low = 0, high = hashes.count
            while low < high {
                let mid = (low + high) / 2
                if hashes[mid] < hash.value { low = mid + 1 } else { high = mid }
            }
            var end = low
            while end < hashes.count && hashes[end] == hash.value { end += 1 }
            return offsets[low ..< end]
        }
    }

    func contentTable() -> ContentTable {
        var pairs: [(hash: Int, offset: Int)] = []
        pairs.reserveCapacity(count)
        for offset in liveOffsets {
            if let hash = withRecord(at: offset, { RecordView(base: $0).content }) { pairs.append((hash.value, offset)) }
        }
        pairs.sort { $0.hash < $1.hash }
        return ContentTable(hashes: pairs.map(\.hash), offsets: pairs.map(\.offset), repacks: repacks)
    }

    /// The latest records of exactly this size and these digests, found by one pass over the
    /// arena in its order (a sequential read, the size compared first): for the first questions
    /// of a run, before a ``ContentTable`` (16 bytes a record, 32 while it is sorted) is worth
    /// making. A record a later one replaced is passed over: its path's slot points elsewhere.
    func records(holding size: Int64, digests: DigestSet) -> [VerifiedRecord] {
        var found: [Int] = []
        arena.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            var offset = 0
            while offset < raw.count {
                let at = base + offset
                if VerifiedIndex.holds(at, size: size, digests: digests),
                   let slot = find(RecordView(base: at).path), VerifiedIndex.recordOffset(slots[slot]) == offset {
                    found.append(offset)
                }
                offset += VerifiedIndex.recordLength(at)
            }
        }
        return found.map { record(at: $0) }
    }

    /// The latest records `keep` picks, decoded, in no particular order.
    func records(where keep: (RecordView) -> Bool) -> [VerifiedRecord] {
        var out: [VerifiedRecord] = []
        for offset in liveOffsets where withRecord(at: offset, { keep(RecordView(base: $0)) }) {
            out.append(record(at: offset))
        }
        return out
    }
}

/// A hash of a size and a set of digests (``Swift/Hasher``, seeded per process): equal for an
/// entry and a verified record with the same size and digests, so that a set of them picks the
/// records worth decoding. Two keys may be equal for different contents; whoever uses one
/// compares what it picked exactly.
package struct ContentHash: Hashable {
    let value: Int

    init(value: Int) { self.value = value }

    package init(size: Int64, digests: PerAlgorithm<Digest>) {
        var hasher = ContentHash.start(size: size)
        for algorithm in DigestAlgorithm.allCases {
            digests[algorithm]?.withUnsafeBytes { ContentHash.add(algorithm, $0, to: &hasher) }
        }
        value = hasher.finalize()
    }

    fileprivate static func start(size: Int64) -> Swift.Hasher {
        var hasher = Swift.Hasher()
        hasher.combine(size)
        return hasher
    }

    fileprivate static func add(_ algorithm: DigestAlgorithm, _ bytes: UnsafeRawBufferPointer, to hasher: inout Swift.Hasher) {
        hasher.combine(algorithm.rawValue)
        hasher.combine(bytes: bytes)
    }
}
