#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MirrorCore
import MirrorModel

/// Deterministic test files and checksums.
///
/// Test files are pseudo-random so that nothing can compress or deduplicate them and a byte served
/// from the wrong offset changes the checksum; they are deterministic (a function of size and seed)
/// so a failing test can be rerun on the same bytes and two tests can agree on content without
/// sharing a file.
///
/// The byte stream for a seed is SplitMix64 (Steele, Lea & Flood 2014): state starts at `seed`,
/// each step adds 0x9E3779B97F4A7C15 and mixes; each 64-bit output is written little-endian. So
/// `bytes(count: n, seed: s)` is exactly the first `n` bytes of a file written with seed `s`.
/// SplitMix64 rather than a cryptographic generator because large-file tests (1 GiB and more) must
/// not spend their time generating data: it fills 1 MiB buffers at over 1.5 GB/s even in a debug
/// build (measured here: generating 1.6 GB/s, SHA-256 0.9 GB/s, so 1 GiB takes about 2 s).
public enum TestData {
    private static let chunkBytes = 1 << 20

    /// Writes `size` deterministic bytes to `path` (creating parent folders, replacing any existing
    /// file) and returns their lowercase SHA-256 hex, computed while writing with `MirrorModel.Hasher`.
    @discardableResult
    public static func writeFile(at path: String, size: Int64, seed: UInt64) throws -> String {
        guard size >= 0 else { throw HarnessError("TestData.writeFile: negative size \(size) for \(path)") }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty {
            do {
                try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
            } catch {
                throw HarnessError("cannot create folder \(parent) for test file: \(error)")
            }
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw HarnessError.posix("open(\(path)) for writing") }
        var closed = false
        defer { if !closed { close(fd) } }

        let hasher = Hasher(.sha256)
        var generator = SplitMix64(seed: seed)
        var buffer = [UInt64](repeating: 0, count: chunkBytes / 8)
        var remaining = size
        while remaining > 0 {
            let count = Int(min(Int64(chunkBytes), remaining))
            buffer.withUnsafeMutableBufferPointer { generator.fill($0) }
            try buffer.withUnsafeBytes { raw in
                let chunk = UnsafeRawBufferPointer(rebasing: raw[0..<count])
                hasher.update(chunk)
                try writeAll(fd, chunk, path: path)
            }
            remaining -= Int64(count)
        }
        closed = true
        guard close(fd) == 0 else { throw HarnessError.posix("close(\(path)) after writing") }
        return hasher.finalize().hex
    }

    /// Lowercase SHA-256 hex of the file at `path`, read in 1 MiB chunks.
    public static func sha256(ofFileAt path: String) throws -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw HarnessError.posix("open(\(path)) to hash it") }
        defer { close(fd) }
        let hasher = Hasher(.sha256)
        var buffer = [UInt8](repeating: 0, count: chunkBytes)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                throw HarnessError.posix("read(\(path)) to hash it")
            }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        return hasher.finalize().hex
    }

    /// The first `count` bytes of the stream for `seed` (the same bytes `writeFile` writes).
    public static func bytes(count: Int, seed: UInt64) -> [UInt8] {
        guard count > 0 else { return [] }
        var generator = SplitMix64(seed: seed)
        var words = [UInt64](repeating: 0, count: (count + 7) / 8)
        words.withUnsafeMutableBufferPointer { generator.fill($0) }
        return words.withUnsafeBytes { Array($0.prefix(count)) }
    }

    /// Lowercase SHA-256 hex of bytes in memory.
    public static func sha256(of bytes: [UInt8]) -> String {
        Hasher.digest(.sha256, of: bytes).hex
    }

    private static func writeAll(_ fd: Int32, _ chunk: UnsafeRawBufferPointer, path: String) throws {
        guard let base = chunk.baseAddress else { return }
        var offset = 0
        while offset < chunk.count {
            let n = write(fd, base + offset, chunk.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                throw HarnessError.posix("write(\(path))")
            }
            offset += n
        }
    }
}

/// SplitMix64; see ``TestData`` for why. Output words are stored little-endian.
struct SplitMix64 {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    /// Fills `words` in one loop over a raw pointer, so that even an unoptimised (debug) build runs
    /// at well over 1 GB/s: no per-word method call, no bounds check, integer index (pointer
    /// comparison and `.littleEndian` are not inlined at -Onone and cost a factor of 2.5).
    mutating func fill(_ words: UnsafeMutableBufferPointer<UInt64>) {
        guard let base = words.baseAddress else { return }
        var s = state
        var i = 0
        let n = words.count
        while i < n {
            s = s &+ 0x9E37_79B9_7F4A_7C15
            var z = s
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            #if _endian(little)
            base[i] = z ^ (z >> 31)
            #else
            base[i] = (z ^ (z >> 31)).byteSwapped
            #endif
            i &+= 1
        }
        state = s
    }
}
