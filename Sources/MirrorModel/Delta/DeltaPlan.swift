/// Which bytes of a new version of a file come from an older local copy and which from the
/// network: a pure value, facts in (the new version's ``ChunkIndex``, the chunks found in the old
/// copy) and a decision out, unit-tested without a file or a server.
///
/// The new file is laid out as segments that cover it in order, as a segmented download is
/// (`PartialFile`): a local segment is filled by copies from the old file, a remote one is
/// fetched with one range request. Neighbouring chunks of one kind are one segment (missing chunks
/// side by side are one coalesced range). Past ``maxSegments`` the shortest local runs between two
/// remote ones are fetched instead, which bounds the requests and the journal record's length.
public struct DeltaPlan: Equatable, Sendable {
    /// Bytes `[start, end)` of the new file; `local` ones are copied, the others fetched.
    public struct Segment: Equatable, Sendable {
        public var start: Int64
        public var end: Int64
        public var local: Bool
        public var length: Int64 { end - start }
    }

    /// `length` bytes copied from `from` in the old file to `to` in the new one.
    public struct Copy: Equatable, Sendable {
        public var from: Int64
        public var to: Int64
        public var length: Int64
    }

    public var segments: [Segment]
    public var copies: [Copy]

    public static let maxSegments = 512

    public var remoteBytes: Int64 { segments.reduce(0) { $0 + ($1.local ? 0 : $1.length) } }
    public var localBytes: Int64 { copies.reduce(0) { $0 + $1.length } }
    public var remoteRanges: Int { segments.filter { !$0.local }.count }

    /// - Parameters:
    ///   - index: the new version's chunks.
    ///   - found: where each chunk digest lies in the old file (its offset there).
    public init(index: ChunkIndex, found: [ChunkDigest: Int64], maxSegments: Int = DeltaPlan.maxSegments) {
        var runs: [Segment] = []
        var copies: [Copy] = []
        var offset: Int64 = 0
        for chunk in index.chunks {
            let length = Int64(chunk.length)
            let from = found[chunk.digest]
            let local = from != nil
            if let last = runs.last, last.local == local, last.end == offset {
                runs[runs.count - 1].end += length
            } else {
                runs.append(Segment(start: offset, end: offset + length, local: local))
            }
            if let from {
                if let last = copies.last, last.from + last.length == from, last.to + last.length == offset {
                    copies[copies.count - 1].length += length
                } else {
                    copies.append(Copy(from: from, to: offset, length: length))
                }
            }
            offset += length
        }
        (segments, self.copies) = DeltaPlan.bounded(runs, copies, maxSegments: max(3, maxSegments))
    }

    /// Fetches the shortest local runs that lie between two remote ones until at most
    /// `maxSegments` segments are left; the copies into them are dropped.
    static func bounded(_ runs: [Segment], _ copies: [Copy], maxSegments: Int) -> ([Segment], [Copy]) {
        guard runs.count > maxSegments else { return (runs, copies) }
        let inner = runs.indices.filter { i in runs[i].local && i > 0 && i < runs.count - 1 }
        // Each fetched local run joins three segments into one.
        let needed = (runs.count - maxSegments + 1) / 2
        let fetched = Set(inner.sorted { (runs[$0].length, $0) < (runs[$1].length, $1) }.prefix(needed))
        var merged: [Segment] = []
        for (i, run) in runs.enumerated() {
            let segment = fetched.contains(i) ? Segment(start: run.start, end: run.end, local: false) : run
            if let last = merged.last, last.local == segment.local, !segment.local {
                merged[merged.count - 1].end = segment.end
            } else {
                merged.append(segment)
            }
        }
        // Both lists are in file order: one sweep keeps the copies that land in a local segment.
        var kept: [Copy] = []
        var s = 0
        for copy in copies {
            while s < merged.count && merged[s].end <= copy.to { s += 1 }
            if s < merged.count, merged[s].local, merged[s].start <= copy.to, copy.to + copy.length <= merged[s].end {
                kept.append(copy)
            }
        }
        return (merged, kept)
    }

    /// Whether the delta is worth it: what it fetches (its ranges and the index) must be at most
    /// `fraction` of the whole file; otherwise a whole download costs about as much, in one
    /// request, and needs no old copy.
    public func isWorthIt(size: Int64, indexBytes: Int64, fraction: Double = 0.8) -> Bool {
        Double(remoteBytes + indexBytes) <= Double(size) * fraction && localBytes > 0
    }
}
