import CLinux
import MirrorFS
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// Splits a file into content-defined chunks and hashes each (docs/manifest.md, "Chunk indexes").
///
/// The publisher (`mirror manifest create --chunks`) and the client chunk with the same
/// parameters, so a region the two versions of a file share is cut at the same places in both,
/// wherever it lies: the client finds it by its chunk digests, however far an insertion or a
/// deletion moved it. The cut points come from `mirror_cdc_cut` (CLinux, a gear hash), the chunk
/// digests from SHA-256 (libcrypto, ``Hasher``).
public struct Chunker: Sendable {
    /// The chunking parameters an index names; both sides must use the same ones.
    public struct Parameters: Equatable, Sendable {
        public var min: Int
        public var average: Int
        public var max: Int

        /// 16 KiB / 64 KiB / 256 KiB: a 4 KiB edit costs one or two chunks (about 64–128 KiB), and
        /// the index of a 1 GiB file has about 16,000 lines (about 1.2 MB, 0.1 % of the file).
        public static let standard = Parameters(min: 16 << 10, average: 64 << 10, max: 256 << 10)

        /// Whether the values are ones this chunker can use: an average that is a power of two,
        /// min < average < max, a minimum of at least 4 KiB (which bounds the chunks, and so the
        /// memory, an index can ask for) and a maximum of at most 1 MiB (one read buffer is 8 of them).
        public var isUsable: Bool {
            min >= 4096 && min < average && average < max && max <= 1 << 20
                && average & (average - 1) == 0
        }
    }

    /// One chunk: where it starts, its length and its SHA-256.
    public struct Chunk: Equatable, Sendable {
        public var offset: Int64
        public var length: Int
        public var digest: ChunkDigest
    }

    public let parameters: Parameters
    let maskSmall: UInt64
    let maskLarge: UInt64

    public init(_ parameters: Parameters = .standard) {
        self.parameters = parameters
        // The top bits of the gear hash depend on the last 64 bytes; a cut needs `bits` of them to
        // be zero: two more before the average size (fewer early cuts), two fewer after it.
        let bits = UInt64(parameters.average.trailingZeroBitCount)
        maskSmall = Chunker.topBits(bits + 2)
        maskLarge = Chunker.topBits(bits > 2 ? bits - 2 : 1)
    }

    static func topBits(_ n: UInt64) -> UInt64 { n >= 64 ? ~0 : ~(~UInt64(0) >> n) }

    /// The gear table: 256 values of splitmix64 from the seed 0x6d6972726f72 ("mirror"), written
    /// out in docs/manifest.md's terms so another implementation can match it.
    static let gear: [UInt64] = {
        var state: UInt64 = 0x6d69_7272_6f72
        return (0 ..< 256).map { _ in
            state &+= 0x9e37_79b9_7f4a_7c15
            var z = state
            z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
            z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
            return z ^ (z >> 31)
        }
    }()

    /// The length of the chunk that starts at `bytes`' first byte (`bytes` holds what is left of
    /// the file, or at least `max` bytes of it).
    func cut(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard let base = bytes.baseAddress else { return 0 }
        return Chunker.gear.withUnsafeBufferPointer { table in
            Int(mirror_cdc_cut(base.assumingMemoryBound(to: UInt8.self), UInt(bytes.count), table.baseAddress,
                               maskSmall, maskLarge, UInt(parameters.min), UInt(parameters.average), UInt(parameters.max)))
        }
    }

    /// Chunks `size` bytes of `file` from offset 0, in order, reading in large blocks. A file
    /// that ends early is an error (`EIO`). `wholeFile`, when given, is fed every byte too (the
    /// publisher hashes the file once for the manifest and the index together). `stop` is asked
    /// before each block is read: a large file takes seconds, and a run must still end at its
    /// deadline or on SIGTERM (``StoppedEarly`` is thrown).
    public func chunks(of file: FileDescriptor, size: Int64, wholeFile: Hasher? = nil, stop: () -> Bool = { false },
                       _ each: (Chunk) throws -> Void) throws {
        let capacity = max(parameters.max * 8, 4 << 20)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 4096)
        defer { buffer.deallocate() }
        guard let base = buffer.baseAddress else { return }
        posix_fadvise(file.fd, 0, 0, POSIX_FADV_SEQUENTIAL)
        let hasher = Hasher(.sha256)
        var fileOffset: Int64 = 0   // of buffer[0]
        var filled = 0
        var start = 0               // the next chunk's start in the buffer
        while fileOffset + Int64(start) < size {
            let left = Int(min(Int64(capacity), size - fileOffset - Int64(start)))
            if filled - start < min(left, parameters.max) {
                // Move what is left to the front and fill up behind it.
                if start > 0 {
                    if filled > start { memmove(base, base + start, filled - start) }
                    fileOffset += Int64(start)
                    filled -= start
                    start = 0
                }
                if stop() { throw StoppedEarly() }
                while filled < capacity && fileOffset + Int64(filled) < size {
                    let want = Int(min(Int64(capacity - filled), size - fileOffset - Int64(filled)))
                    let n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled ..< filled + want]),
                                          at: fileOffset + Int64(filled))
                    if n == 0 { throw SystemError("read", file.displayPath + " (it ended early)", code: EIO) }
                    filled += n
                }
                continue
            }
            let available = UnsafeRawBufferPointer(rebasing: buffer[start ..< start + min(left, filled - start)])
            let length = cut(available)
            let piece = UnsafeRawBufferPointer(rebasing: available[0 ..< length])
            hasher.reset()
            hasher.update(piece)
            wholeFile?.update(piece)
            try each(Chunk(offset: fileOffset + Int64(start), length: length, digest: ChunkDigest(hasher.finalize().bytes)))
            start += length
        }
    }
}

/// A chunk's SHA-256 held inline (four words), so a map of thousands of them makes no array per chunk.
public struct ChunkDigest: Hashable, Sendable, CustomStringConvertible {
    let words: (UInt64, UInt64, UInt64, UInt64)

    public init(_ bytes: [UInt8]) {
        precondition(bytes.count == 32, "a SHA-256 has 32 bytes")
        func word(_ i: Int) -> UInt64 { (0 ..< 8).reduce(0) { $0 << 8 | UInt64(bytes[i * 8 + $1]) } }
        words = (word(0), word(1), word(2), word(3))
    }

    /// 64 hex digits, either case; nil otherwise.
    public init?(hex: String) {
        guard let digest = Digest(hex: hex, byteCount: 32) else { return nil }
        self.init(digest.bytes)
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
