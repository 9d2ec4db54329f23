import MirrorFS
import MirrorModel

/// Which signature check a copy kept under `DEST/.mirror/manifest/` must have passed before a run
/// uses it (on a 304, or as the fallback while the server is down), given the run's options.
///
/// A checksum list is kept as the YAML manifest made of it and a Metalink file as it is, so their
/// OpenPGP signature cannot be checked again. What was checked is written into the copy when it
/// is made instead: the first line of the manifest made of a list, an XML comment in a Metalink
/// file (``verifiedNote``). The copy's owner, mode and SHA-256 are checked before this (the kept
/// copy's own rules, docs/manifest.md), and bytes from the network that carry the mark are
/// refused (``PublishedList/prepare(_:place:trusted:keyring:)``), so the mark says what this
/// machine checked, nothing else.
///
/// - `--keyring`: a kept list or Metalink file must carry the mark; a YAML manifest needs `--trust`.
/// - `--trust`: a YAML manifest's Ed25519 signature is checked again; a kept list or Metalink
///   file needs `--keyring`.
/// A copy that fails is not used (a warning, then a full fetch, which checks what it fetches).
enum KeptPublishedCopy {
    static let verifiedNote = "mirror: OpenPGP signature verified"

    /// What the check found, written with the mark: when the signature was made and the SHA-256
    /// of the bytes it covers. A destination holds the next list to them, as it holds a signed
    /// YAML manifest to its `serial` (``SerialGate``): an older signature is a rollback.
    struct Signed: Equatable {
        var signedAt: Int64
        var sha256: String
    }

    /// The mark with what the check found.
    static func note(_ signed: Signed) -> String {
        "\(verifiedNote); signed at \(signed.signedAt); signed sha256 \(signed.sha256)"
    }

    /// What the mark in `bytes` says was checked; nil for a copy without the mark, or with a
    /// mark written before the mark said it.
    static func signed(in bytes: [UInt8]) -> Signed? {
        let head = Array(bytes.prefix(4096))
        guard let at = head.firstRange(of: Array((verifiedNote + "; signed at ").utf8))?.upperBound else { return nil }
        let digits = head[at...].prefix { (0x30...0x39).contains($0) }
        let rest = head[(at + digits.count)...]
        let shaKey = Array("; signed sha256 ".utf8)
        guard !digits.isEmpty, digits.count <= 18, let signedAt = Int64(String(decoding: digits, as: UTF8.self)),
              rest.starts(with: shaKey) else { return nil }
        let hex = String(decoding: rest.dropFirst(shaKey.count).prefix(64), as: UTF8.self)
        guard HoldFile.isDigest(hex) else { return nil }
        return Signed(signedAt: signedAt, sha256: hex)
    }

    /// `manifest`, parsed from `bytes`, with what their mark says was checked: its `serial` the
    /// signature's time, and the SHA-256 of the signed bytes (``Manifest/signedListSHA256``).
    /// Only a kept copy or what this run just checked carries the mark (a served one is refused).
    static func applyMark(of bytes: [UInt8], to manifest: inout Manifest) {
        guard let signed = signed(in: bytes) else { return }
        manifest.serial = signed.signedAt
        manifest.signedListSHA256 = signed.sha256
    }

    /// The Metalink file with the mark, as an XML comment after its declaration (or first).
    static func markVerified(metalink bytes: [UInt8], _ signed: Signed) -> [UInt8] {
        let comment = Array("<!-- \(note(signed)) -->\n".utf8)
        if bytes.starts(with: "<?xml".utf8), let end = bytes.firstRange(of: Array("?>".utf8))?.upperBound {
            return Array(bytes[..<end]) + [0x0A] + comment + Array(bytes[end...])
        }
        return comment + bytes
    }

    static func isMarkedVerified(_ bytes: [UInt8]) -> Bool {
        bytes.prefix(4096).firstRange(of: Array(verifiedNote.utf8)) != nil
    }

    /// Whether the copy is one made of a checksum list, or a Metalink file.
    static func isPublished(_ bytes: [UInt8]) -> Bool {
        Metalink.looksLike(bytes) || bytes.starts(with: PublishedList.madeMarker.utf8)
    }

    /// The check of a kept copy for a run with these options; nil when the run checks nothing.
    static func check(trust: (([UInt8], [UInt8]?) throws -> Void)?, keyring: OpenPGPKeyring?,
                      name: String) -> (([UInt8], [UInt8]?) throws -> Void)? {
        guard trust != nil || keyring != nil else { return nil }
        return { bytes, signature in
            if isPublished(bytes) {
                guard let keyring else { throw PublishedListError.notApplicable(name, keyring: false) }
                guard isMarkedVerified(bytes) else {
                    throw OpenPGPError(signed: name, signature: name, keyring: keyring.path,
                                       cause: .unreadable("the copy was kept by a run without --keyring"))
                }
            } else {
                guard let trust else { throw PublishedListError.notApplicable(name, keyring: true) }
                try trust(bytes, signature)
            }
        }
    }
}
