import MirrorModel

/// A Metalink file's piece hashes (``PieceHashes``) checked as the bytes are hashed, on the
/// thread that hashes the file (``PartialWriter``): the same bytes, in file order, go to the
/// whole-file hashers and to the piece's own hasher. At a piece's last byte its digest is compared;
/// a wrong piece rewinds the whole-file hashers to the piece's first byte (their states are taken
/// there) and is reported, so the download drops the mirror that sent it and fetches the piece
/// again from another (docs/manifest.md, "Metalink 4").
///
/// A piece is checked only when this check saw it from its first byte: a download resumed from a
/// saved hash state in the middle of a piece leaves that piece to the whole-file digest.
final class PieceCheck {
    /// A piece whose bytes did not match its hash.
    struct WrongPiece: Error, Equatable, Sendable {
        let index: Int
        let range: Range<Int64>
        /// The digest of the bytes received, hex.
        let got: String
    }

    let hashes: PieceHashes
    let size: Int64
    private let hasher: PieceHasher
    /// The file offset of the next byte this check expects.
    private(set) var next: Int64
    /// Whether the current piece was fed from its first byte.
    private var wholePiece = false
    /// The whole-file hashers' states at the current piece's first byte.
    private var statesAtPieceStart: [[UInt8]] = []

    /// nil when libcrypto cannot make the piece hasher.
    init?(_ hashes: PieceHashes, size: Int64, from offset: Int64) {
        guard let hasher = PieceHasher(hashes.kind) else { return nil }
        self.hashes = hashes
        self.size = size
        self.hasher = hasher
        next = offset
    }

    /// Feeds `bytes`, which continue the file at ``next``, to `hashers` and to the piece hasher.
    /// At a wrong piece the hashers are rewound to its first byte, the bytes after it are not
    /// fed, and the piece is returned; ``next`` is then that first byte.
    func feed(_ bytes: UnsafeRawBufferPointer, into hashers: HasherSet) -> WrongPiece? {
        var done = 0
        while done < bytes.count {
            let index = hashes.index(of: next)
            let range = hashes.range(of: index, size: size)
            if next == range.lowerBound {
                hasher.reset()
                wholePiece = true
                statesAtPieceStart = hashers.rawStates()
            }
            let n = Int(min(Int64(bytes.count - done), range.upperBound - next))
            let part = UnsafeRawBufferPointer(rebasing: bytes[done..<(done + n)])
            hashers.update(part)
            hasher.update(part)
            done += n
            next += Int64(n)
            guard next == range.upperBound, wholePiece else { continue }
            wholePiece = false
            let digest = hasher.finish()
            if index < hashes.hashes.count, digest != hashes.hashes[index] {
                _ = hashers.restoreRaw(statesAtPieceStart)
                next = range.lowerBound
                return WrongPiece(index: index, range: range, got: Digest(bytes: digest).hex)
            }
        }
        return nil
    }

    /// Starts again at `offset` (a piece's first byte, after a wrong piece was fetched anew).
    func restart(at offset: Int64) {
        next = offset
        wholePiece = false
    }
}
