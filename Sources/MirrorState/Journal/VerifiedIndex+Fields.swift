import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// Reading a packed record's digest fields (the layout in ``VerifiedIndex/Layout``): one walker, and
/// what is asked of a record through it, in place.
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
}
