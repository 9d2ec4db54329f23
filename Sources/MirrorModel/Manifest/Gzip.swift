import CZlib
import MirrorKit

/// Gunzipping of manifests (`manifest.yaml.gz`), recognised by the RFC 1952 magic bytes 1f 8b and
/// never by file name, as the spec says.
package enum Gzip {
    /// Decompressed manifests larger than this are refused: a few KiB of gzip can expand to
    /// gigabytes (a "gzip bomb"), and 1 GiB is far beyond any real manifest (~10^7 entries).
    package static let defaultLimit = 1 << 30

    /// How many times its compressed size a manifest may expand to (see ``limit(forCompressedSize:)``).
    static let expansionFactor = 128
    /// What any gzip manifest may expand to, however small: small manifests are never refused.
    static let expansionFloor = 64 << 20

    /// The most a gzip manifest of `compressedSize` bytes may expand to: `expansionFactor` times
    /// its size, at least `expansionFloor`, at most ``defaultLimit``. Why a multiple: deflate
    /// cannot shrink an entry below its checksum (a sha256 is 64 hex digits, 32 bytes of
    /// entropy), so real manifests compress about 4:1 (100,000 entries with mtime and mode:
    /// 18.4 MB to 4.7 MB) and even 4,000-byte paths that differ only at the end stay under 80:1,
    /// while a gzip bomb reaches deflate's ~1000:1. With a fixed 1 GiB cap, 2 MB of gzip cost
    /// 1.6 GB of memory before they were refused; now they stop at 256 MiB.
    static func limit(forCompressedSize compressedSize: Int) -> Int {
        let (scaled, overflow) = compressedSize.multipliedReportingOverflow(by: expansionFactor)
        return overflow ? defaultLimit : min(defaultLimit, max(expansionFloor, scaled))
    }

    struct Failure: Error, Equatable { var message: String }

    static func isCompressed(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b
    }

    /// Inflates a whole gzip file, including files of several members (what `cat a.gz b.gz` makes
    /// and `gzip -d` accepts), with zlib's `inflate` after `inflateInit2(…, 15 + 16)` (gzip wrapper,
    /// see `mirror_inflate_init_gzip`); the wrapper's CRC-32 and length are checked by zlib.
    /// Output beyond `limit` bytes (default: ``limit(forCompressedSize:)`` of the input) is refused
    /// as soon as it is produced, with an error that names the limit.
    static func decompress(_ input: [UInt8], limit explicitLimit: Int? = nil) throws -> [UInt8] {
        let limit = explicitLimit ?? Gzip.limit(forCompressedSize: input.count)
        let why = explicitLimit != nil ? ""
            : ": a gzip manifest may expand to \(expansionFactor) times its size (here \(Formatting.bytes(Int64(input.count)))), "
            + "at least \(expansionFloor >> 20) MiB and at most \(defaultLimit >> 20) MiB"
        let inflater = try Inflater()
        let stream = inflater.stream
        let chunkSize = 1 << 18
        let chunk = UnsafeMutablePointer<UInt8>.allocate(capacity: chunkSize)
        defer { chunk.deallocate() }
        var output: [UInt8] = []
        output.reserveCapacity(min(limit, 1 << 28, input.count.multipliedReportingOverflow(by: 6).partialValue))

        try input.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { throw Failure(message: "not a valid gzip file: it is empty") }
            // avail_in is a 32-bit uInt: feed the input in slices.
            var fed = 0
            func refill() {
                guard stream.pointee.avail_in == 0, fed < buffer.count else { return }
                let n = min(buffer.count - fed, 1 << 30)
                stream.pointee.next_in = UnsafeMutablePointer(mutating: base + fed)
                stream.pointee.avail_in = UInt32(n)
                fed += n
            }
            func position() -> Int { fed - Int(stream.pointee.avail_in) }

            while true {
                refill()
                stream.pointee.next_out = chunk
                stream.pointee.avail_out = UInt32(chunkSize)
                let status = inflate(stream, Z_NO_FLUSH)
                let produced = chunkSize - Int(stream.pointee.avail_out)
                guard output.count + produced <= limit else {
                    throw Failure(message: "decompressed manifest exceeds \(limit >> 20) MiB (gzip bomb?)" + why)
                }
                output.append(contentsOf: UnsafeBufferPointer(start: chunk, count: produced))

                switch status {
                case Z_OK:
                    continue
                case Z_STREAM_END:
                    refill()
                    let at = position()
                    if at == buffer.count { return }
                    guard buffer.count - at >= 2, buffer[at] == 0x1f, buffer[at + 1] == 0x8b else {
                        throw Failure(message: "not a valid gzip file: unexpected data after the compressed stream (byte \(at))")
                    }
                    guard inflateReset(stream) == Z_OK else { throw Failure(message: "not a valid gzip file: cannot restart zlib") }
                case Z_BUF_ERROR:
                    // No progress with an empty output chunk and all input given: input ran out.
                    throw Failure(message: "not a valid gzip file: it is truncated (the compressed data ends early)")
                case Z_MEM_ERROR:
                    throw Failure(message: "cannot decompress manifest: out of memory")
                default:
                    let detail = stream.pointee.msg.map { String(cString: $0) } ?? "zlib error \(status)"
                    throw Failure(message: "not a valid gzip file: \(detail)")
                }
            }
        }
        return output
    }
}

/// Owns one heap-allocated `z_stream` (zlib checks that the stream never moves between calls) and
/// releases zlib's state with `inflateEnd` in `deinit`.
private final class Inflater {
    let stream: UnsafeMutablePointer<z_stream>

    init() throws {
        stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())  // zalloc/zfree/opaque = Z_NULL: zlib's malloc and free
        guard mirror_inflate_init_gzip(stream) == Z_OK else {
            stream.deallocate()
            throw Gzip.Failure(message: "cannot decompress manifest: zlib failed to initialise")
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deallocate()
    }
}
