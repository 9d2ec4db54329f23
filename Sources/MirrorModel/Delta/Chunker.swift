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
        /// FastCDC's normalization level: a cut needs `level` more zero bits before `average` and
        /// `level` fewer after it. Level 2 makes sizes cluster around the average but meets the old
        /// cuts again only several chunks after a change; level 1 within one or two (bench/delta).
        public var level: Int

        public init(min: Int, average: Int, max: Int, level: Int) {
            self.min = min
            self.average = average
            self.max = max
            self.level = level
        }

        /// 4 KiB / 16 KiB / 64 KiB, level 1: a 64 KiB edit costs about a chunk and a half (30 KB)
        /// more than itself, and with the compact index (10 to 13 bytes a chunk) the index is about
        /// 0.05 % of the file. Chosen by measurement (docs/manifest.md, "Choosing the chunking").
        public static let standard = Parameters(min: 4 << 10, average: 16 << 10, max: 64 << 10, level: 1)

        /// The chunking of a version-1 (text) index: 16 KiB / 64 KiB / 256 KiB, level 2. What
        /// `manifest create --chunks-format 1` writes, for clients that read only version 1.
        public static let version1 = Parameters(min: 16 << 10, average: 64 << 10, max: 256 << 10, level: 2)

        /// The parameters a publisher chunks a `size`-byte file with: ``standard``, with the
        /// average doubled (min and max with it) for each doubling of the file past 16 GiB, up to
        /// 256 KiB, so that a file has at most about a million chunks: the client's map of them,
        /// and the index, stay tens of megabytes for a terabyte.
        public static func forFile(ofSize size: Int64) -> Parameters {
            var p = standard
            while p.average < 256 << 10 && size / Int64(p.average) > 1 << 20 {
                p = Parameters(min: p.min * 2, average: p.average * 2, max: p.max * 2, level: p.level)
            }
            return p
        }

        /// Whether the values are ones this chunker can use: an average that is a power of two,
        /// min < average < max, a minimum of at least 4 KiB (which bounds the chunks, and so the
        /// memory, an index can ask for), a maximum of at most 1 MiB (one read buffer is 8 of them)
        /// and a normalization level of 0 to 3.
        public var isUsable: Bool {
            min >= 4096 && min < average && average < max && max <= 1 << 20
                && average & (average - 1) == 0 && (0 ... 3).contains(level)
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
        // be zero: `level` more before the average size (fewer early cuts), `level` fewer after it.
        let bits = UInt64(parameters.average.trailingZeroBitCount)
        let level = UInt64(Swift.max(0, Swift.min(3, parameters.level)))
        maskSmall = Chunker.topBits(bits + level)
        maskLarge = Chunker.topBits(bits > level ? bits - level : 1)
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
