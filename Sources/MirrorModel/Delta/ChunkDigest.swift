/// A chunk's SHA-256 held inline (four words), so a map of thousands of them makes no array per
/// chunk. A version-2 index keeps only its first bytes (docs/manifest.md, "Chunk indexes"): such
/// a digest holds them and zeros after, and a full one is compared with it once
/// ``truncated(to:)`` to as many bytes.
public struct ChunkDigest: Hashable, Sendable, CustomStringConvertible {
    let words: (UInt64, UInt64, UInt64, UInt64)

    public init(_ bytes: [UInt8]) {
        precondition(bytes.count == 32, "a SHA-256 has 32 bytes")
        self.init(prefix: bytes[...])
    }

    /// The first `bytes.count` (at most 32) bytes of a digest, the others zero.
    public init(prefix bytes: ArraySlice<UInt8>) {
        let start = bytes.startIndex
        func word(_ i: Int) -> UInt64 {
            (0 ..< 8).reduce(0) { w, k in
                let at = i * 8 + k
                return w << 8 | (at < bytes.count ? UInt64(bytes[start + at]) : 0)
            }
        }
        words = (word(0), word(1), word(2), word(3))
    }

    /// 64 hex digits, either case; nil otherwise.
    public init?(hex: String) {
        guard let digest = Digest(hex: hex, byteCount: 32) else { return nil }
        self.init(digest.bytes)
    }

    /// The first `count` bytes (1 to 32), the others zero.
    public func truncated(to count: Int) -> ChunkDigest {
        guard count < 32 else { return self }
        func keep(_ word: UInt64, _ i: Int) -> UInt64 {
            let kept = Swift.max(0, Swift.min(8, count - i * 8))
            return kept == 8 ? word : kept == 0 ? 0 : word & ~(~UInt64(0) >> UInt64(kept * 8))
        }
        return ChunkDigest(words: (keep(words.0, 0), keep(words.1, 1), keep(words.2, 2), keep(words.3, 3)))
    }

    private init(words: (UInt64, UInt64, UInt64, UInt64)) { self.words = words }

    /// The first `count` bytes, big-endian, as an index stores them.
    public func bytes(_ count: Int) -> [UInt8] {
        let all = [words.0, words.1, words.2, words.3]
        return (0 ..< Swift.min(32, count)).map { UInt8(truncatingIfNeeded: all[$0 / 8] >> UInt64(56 - 8 * ($0 % 8))) }
    }

    public var description: String {
        [words.0, words.1, words.2, words.3].map { word in
            let s = String(word, radix: 16)
            return String(repeating: "0", count: 16 - s.count) + s
        }.joined()
    }

    public static func == (a: ChunkDigest, b: ChunkDigest) -> Bool { a.words == b.words }
    /// All four words: an index's digests are checked only against the manifest, so a publisher's
    /// bug (or a hostile one) could make many share their first half, and a map keyed by half the
    /// digest would then degrade to a list (the fuzz corpus's 100,000-chunk index did that).
    public func hash(into hasher: inout Swift.Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }
}
