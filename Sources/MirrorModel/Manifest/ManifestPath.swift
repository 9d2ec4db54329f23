/// An entry's path, kept as its bytes: in the manifest's shared blocks (``ByteArena``) when the
/// reader made it, else in a block of its own.
///
/// Why not `String`: a path longer than 15 bytes is a heap string of its own, about 80 bytes with
/// its header and the allocator's rounding, so 10^6 paths of 47 bytes took 80 MB where their
/// bytes are 47 MB, and the path index copied the same bytes again (docs/performance.md, "Paths
/// in the arena"). Compared and hashed by bytes, never canonically: two paths that differ only in
/// Unicode normalisation are two files.
/// `Sendable`: its bytes are never written once the path is made (``SharedBlock`` says why a block
/// may be shared).
public struct ManifestPath: Hashable, Comparable, Sendable, CustomStringConvertible {
    private let shared: SharedBlock
    private let offset: UInt32
    private let count: UInt32

    /// A path of its own (tests, paths that do not come from a manifest).
    public init(_ path: String) {
        let bytes = Array(path.utf8)
        self.init(block: ByteBlock.holding(bytes), offset: 0, count: bytes.count)
    }

    /// `count` bytes at `offset` of a block: ``ByteArena/path(_:)``. A block is at most 64 KiB
    /// or one value's size, and a manifest under 2 GiB (``YAMLParser``), so both fit 32 bits.
    init(block: ByteBlock, offset: Int, count: Int) {
        self.shared = SharedBlock(block)
        self.offset = UInt32(truncatingIfNeeded: offset)
        self.count = UInt32(truncatingIfNeeded: count)
    }

    /// The path as text (an allocation when it is longer than 15 bytes: the hot paths use
    /// ``withBytes(_:)``).
    public var string: String { withBytes { String(decoding: $0, as: UTF8.self) } }

    public var description: String { string }

    public var byteCount: Int { Int(count) }

    @inline(__always)
    public func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try shared.block.withBytes(at: offset, count: count, body)
    }

    public static func == (a: ManifestPath, b: ManifestPath) -> Bool {
        a.count == b.count && a.withBytes { x in b.withBytes { y in x.elementsEqual(y) } }
    }

    /// Byte order (UTF-8 order is code point order), the order `manifest create` writes.
    public static func < (a: ManifestPath, b: ManifestPath) -> Bool {
        a.withBytes { x in b.withBytes { y in x.lexicographicallyPrecedes(y) } }
    }

    public func hash(into hasher: inout Swift.Hasher) {
        withBytes { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
