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

    /// The Metalink file with the mark, as an XML comment after its declaration (or first).
    static func markVerified(metalink bytes: [UInt8]) -> [UInt8] {
        let comment = Array("<!-- \(verifiedNote) -->\n".utf8)
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
