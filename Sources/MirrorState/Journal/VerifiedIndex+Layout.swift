import MirrorFS
import MirrorModel

/// Where a packed record's fields lie: the one place that knows the layout's offsets, and the one
/// walker of its digest fields (``digestFields(_:_:)``).
///
/// Record layout (native byte order; the arena lives only in memory):
///
///     0  size      Int64     8  inode     UInt64    16 mtime s  Int64    24 ctime s  Int64
///     32 mtime ns  UInt32   36  ctime ns  UInt32    40 device   UInt16 (its code: ``DeviceTable``)
///     42 path length UInt16 (0xFFFF: the length is the UInt32 below)
///     44 flags     UInt8: bit 0 adopted (`found=1`); bits 1-2 the sha256 field, bits 3-4 the
///                  sha512 field (0 absent, 1 raw, 2 text); bit 5 the device follows as a UInt64
///                  (more devices than codes); bit 6 a long path's UInt32 length follows
///     45 [device UInt64] [path length UInt32], then the path's bytes (percent-decoded, as the
///        file system names it), then each present digest in ``DigestAlgorithm`` order: raw
///        (``DigestAlgorithm/byteCount`` bytes), or text (UInt16 length and the bytes: a value
///        that is not lowercase hex of the right length, kept as written so that it matches no
///        entry, as the line would not)
///
/// 45 bytes before the path where a record had 53, and no byte per digest for its kind: at 10^6
/// records of a short path and a SHA-256, 10 MB less while a no-op reads the journal
/// (docs/performance.md, "A smaller journal index").
extension VerifiedIndex {
    enum Layout {
        static let size = 0, inode = 8, mtimeSeconds = 16, ctimeSeconds = 24
        static let mtimeNanoseconds = 32, ctimeNanoseconds = 36
        static let device = 40, pathLength = 42, flags = 44
        static let headSize = 45

        static let adopted: UInt8 = 1
        static let deviceInline: UInt8 = 1 << 5
        static let longPath: UInt8 = 1 << 6
        /// A path this long or longer keeps its length in the UInt32 after the head.
        static let longPathLength = Int(UInt16.max)

        /// What a digest field is, in the flags' two bits for its algorithm.
        static let absent: UInt8 = 0, raw: UInt8 = 1, text: UInt8 = 2

        /// Bits 1-2 and 3-4 hold the two algorithms' fields; a third algorithm would need a wider
        /// flags field (`VerifiedLayoutTests` checks that there are two).
        @inline(__always)
        static func shift(_ algorithm: DigestAlgorithm) -> UInt8 { UInt8(1 + 2 * algorithm.rawValue) }

        @inline(__always)
        static func flags(_ at: UnsafeRawPointer) -> UInt8 { at.load(fromByteOffset: flags, as: UInt8.self) }

        @inline(__always)
        static func kind(_ flags: UInt8, _ algorithm: DigestAlgorithm) -> UInt8 { (flags >> shift(algorithm)) & 3 }

        /// Where the path's bytes start, after the head and what the flags say follows it.
        @inline(__always)
        static func pathStart(_ flags: UInt8) -> Int {
            headSize + (flags & deviceInline != 0 ? 8 : 0) + (flags & longPath != 0 ? 4 : 0)
        }

        @inline(__always)
        static func pathCount(_ at: UnsafeRawPointer) -> Int {
            let flags = flags(at)
            guard flags & longPath != 0 else { return Int(at.loadUnaligned(fromByteOffset: pathLength, as: UInt16.self)) }
            return Int(at.loadUnaligned(fromByteOffset: headSize + (flags & deviceInline != 0 ? 8 : 0), as: UInt32.self))
        }

        /// The path's bytes, valid while the arena is.
        @inline(__always)
        static func path(_ at: UnsafeRawPointer) -> UnsafeBufferPointer<UInt8> {
            UnsafeBufferPointer(start: (at + pathStart(flags(at))).assumingMemoryBound(to: UInt8.self), count: pathCount(at))
        }

        static func mtime(_ at: UnsafeRawPointer) -> FileTime {
            FileTime(seconds: at.loadUnaligned(fromByteOffset: mtimeSeconds, as: Int64.self),
                     nanoseconds: Int64(at.loadUnaligned(fromByteOffset: mtimeNanoseconds, as: UInt32.self)))
        }

        static func ctime(_ at: UnsafeRawPointer) -> FileTime {
            FileTime(seconds: at.loadUnaligned(fromByteOffset: ctimeSeconds, as: Int64.self),
                     nanoseconds: Int64(at.loadUnaligned(fromByteOffset: ctimeNanoseconds, as: UInt32.self)))
        }

        /// The device's code, or the device itself when it has none (bit 5).
        static func device(_ at: UnsafeRawPointer, in devices: DeviceTable) -> UInt64 {
            guard flags(at) & deviceInline != 0 else {
                return devices[at.loadUnaligned(fromByteOffset: device, as: UInt16.self)]
            }
            return at.loadUnaligned(fromByteOffset: headSize, as: UInt64.self)
        }

        /// The bytes before the digest fields of a record with this path and device.
        static func headLength(pathCount: Int, deviceCode: UInt16?) -> Int {
            headSize + (deviceCode == nil ? 8 : 0) + (pathCount >= longPathLength ? 4 : 0) + pathCount
        }

        /// Writes everything before the digest fields, whose kinds `kinds` holds (already in
        /// their flag bits); returns where the first digest field goes.
        static func writeHead(_ p: UnsafeMutableRawPointer, path: UnsafeBufferPointer<UInt8>, size: Int64, inode: UInt64,
                              device: UInt64, deviceCode: UInt16?, mtime: FileTime, ctime: FileTime, adopted: Bool,
                              kinds: UInt8) -> Int {
            p.storeBytes(of: size, toByteOffset: Layout.size, as: Int64.self)
            p.storeBytes(of: inode, toByteOffset: Layout.inode, as: UInt64.self)
            p.storeBytes(of: mtime.seconds, toByteOffset: mtimeSeconds, as: Int64.self)
            p.storeBytes(of: ctime.seconds, toByteOffset: ctimeSeconds, as: Int64.self)
            p.storeBytes(of: UInt32(truncatingIfNeeded: mtime.nanoseconds), toByteOffset: mtimeNanoseconds, as: UInt32.self)
            p.storeBytes(of: UInt32(truncatingIfNeeded: ctime.nanoseconds), toByteOffset: ctimeNanoseconds, as: UInt32.self)
            var flags = kinds | (adopted ? Layout.adopted : 0)
            var i = headSize
            p.storeBytes(of: deviceCode ?? 0, toByteOffset: Layout.device, as: UInt16.self)
            if deviceCode == nil {
                flags |= deviceInline
                p.storeBytes(of: device, toByteOffset: i, as: UInt64.self)
                i += 8
            }
            if path.count >= longPathLength {
                flags |= longPath
                p.storeBytes(of: UInt16.max, toByteOffset: pathLength, as: UInt16.self)
                p.storeBytes(of: UInt32(truncatingIfNeeded: path.count), toByteOffset: i, as: UInt32.self)
                i += 4
            } else {
                p.storeBytes(of: UInt16(path.count), toByteOffset: pathLength, as: UInt16.self)
            }
            p.storeBytes(of: flags, toByteOffset: Layout.flags, as: UInt8.self)
            if let source = path.baseAddress { (p + i).copyMemory(from: source, byteCount: path.count) }
            return i + path.count
        }
    }

    /// One digest field of a packed record (``Layout``).
    enum DigestField {
        case absent
        /// The digest's bytes.
        case raw(UnsafeRawBufferPointer)
        /// A value kept as written (not lowercase hex of the right length).
        case text(UnsafeRawBufferPointer)
    }

    /// Walks the digest fields of the packed record at `at`, in ``DigestAlgorithm`` order, while
    /// `body` returns true; returns the offset past the last field walked (the record's length
    /// when the walk ran to the end). The one reader of the fields' layout: the compare, the
    /// decoding, the content hash and the length of a record all go through it.
    @inline(__always)
    @discardableResult
    static func digestFields(_ at: UnsafeRawPointer, _ body: (DigestAlgorithm, DigestField) -> Bool) -> Int {
        let flags = Layout.flags(at)
        var i = Layout.pathStart(flags) + Layout.pathCount(at)
        for algorithm in DigestAlgorithm.allCases {
            let field: DigestField
            switch Layout.kind(flags, algorithm) {
            case Layout.raw:
                field = .raw(UnsafeRawBufferPointer(start: at + i, count: algorithm.byteCount))
                i += algorithm.byteCount
            case Layout.text:
                let n = Int(at.loadUnaligned(fromByteOffset: i, as: UInt16.self))
                field = .text(UnsafeRawBufferPointer(start: at + i + 2, count: n))
                i += 2 + n
            default:
                field = .absent
            }
            guard body(algorithm, field) else { break }
        }
        return i
    }

    /// The length of the packed record at `at` (the layout in ``VerifiedIndex/Layout``).
    static func recordLength(_ at: UnsafeRawPointer) -> Int {
        digestFields(at) { _, _ in true }
    }

    /// The devices of the records, each once: a record keeps a 16-bit code rather than the 8 bytes
    /// of `st_dev`, since a destination's files lie on one device or a few.
    struct DeviceTable {
        private var devices: [UInt64] = []
        private var codes: [UInt64: UInt16] = [:]
        private var last: (device: UInt64, code: UInt16)?

        /// The device's code; nil once 65,535 devices have one (the record then holds the device).
        mutating func code(for device: UInt64) -> UInt16? {
            if let last, last.device == device { return last.code }
            if let code = codes[device] {
                last = (device, code)
                return code
            }
            guard devices.count < Int(UInt16.max) else { return nil }
            let code = UInt16(devices.count)
            devices.append(device)
            codes[device] = code
            last = (device, code)
            return code
        }

        subscript(code: UInt16) -> UInt64 { Int(code) < devices.count ? devices[Int(code)] : 0 }
    }
}
