import COpenSSL

/// A manifest whose detached signature is missing, malformed or does not verify with the trusted
/// key. The executable exits 65 (EX_DATAERR), like for any manifest it must not use.
public struct SignatureError: Error, CustomStringConvertible, Equatable, Sendable {
    public enum Cause: Equatable, Sendable {
        /// No signature file (or it cannot be read; `detail` says why).
        case missing(detail: String)
        /// The signature file is not one base64 line of a 64-byte signature.
        case malformed(detail: String)
        /// Well-formed, but not a signature of these bytes by the trusted key.
        case mismatch

        /// A few words for a warning: "no signature", "a malformed signature", "a mismatch".
        public var summary: String {
            switch self {
            case .missing: return "no signature"
            case .malformed: return "a malformed signature"
            case .mismatch: return "a mismatch"
            }
        }
    }

    /// The manifest as the user named it.
    public var manifest: String
    /// The signature file (or URL) as named in messages.
    public var signature: String
    /// The trusted key file.
    public var key: String
    public var cause: Cause

    public init(manifest: String, signature: String, key: String, cause: Cause) {
        self.manifest = manifest
        self.signature = signature
        self.key = key
        self.cause = cause
    }

    public var description: String {
        switch cause {
        case .missing(let detail):
            return "\(manifest): refused: no signature (\(signature): \(detail)); --trust requires a signed manifest (mirror manifest sign)"
        case .malformed(let detail):
            return "\(manifest): refused: signature \(signature) is malformed: \(detail)"
        case .mismatch:
            let keys = key.contains(", ") ? "any of the trusted keys \(key)" : "the trusted key \(key)"
            return "\(manifest): refused: signature \(signature) does not match the manifest and \(keys) (the manifest was changed after signing, or signed with another key)"
        }
    }
}

/// Detached Ed25519 signatures of manifests (RFC 8032 through OpenSSL's `EVP_DigestSign` /
/// `EVP_DigestVerify`), the format of `mirror manifest sign`.
///
/// The signature covers the manifest file's exact bytes, as stored (the gzip bytes for a
/// compressed manifest): verifying before parsing means an unsigned or tampered manifest never
/// reaches the YAML parser, and there is no canonical form to get wrong.
///
/// File format (`MANIFEST.sig`): the 64 signature bytes in standard base64 (RFC 4648 §4, with
/// padding: 88 characters), then a newline. Surrounding ASCII whitespace is ignored when reading;
/// anything else is malformed. `base64 -d FILE.sig` gives the raw signature that
/// `openssl pkeyutl -verify -rawin` takes.
public enum ManifestSignature {
    /// Ed25519 signatures are always 64 bytes.
    public static let byteCount = 64
    /// Refuse to read more than this from a signature file: it has 89 bytes.
    public static let maxFileSize = 4096

    /// The signature file for `manifestPath` when none is named: `MANIFEST.sig`.
    public static func defaultPath(for manifestPath: String) -> String { manifestPath + ".sig" }

    /// The signature file's contents for `manifest`: base64 and a newline.
    public static func sign(manifest: [UInt8], key: SigningKey) throws -> [UInt8] {
        Array(Base64.encode(try key.sign(manifest)).utf8) + [0x0A]
    }

    /// Checks that `signature` (a signature file's contents) is a valid signature of `manifest` by
    /// `trustedKey`; throws a ``SignatureError`` naming `manifestName` and `signatureName` if not.
    /// Works on bytes in memory so that a manifest fetched over the network is checked the same way.
    public static func verify(manifest: [UInt8], signature: [UInt8], trustedKey: TrustedKey,
                              manifestName: String = "manifest", signatureName: String = "signature") throws {
        func refuse(_ cause: SignatureError.Cause) -> SignatureError {
            SignatureError(manifest: manifestName, signature: signatureName, key: trustedKey.name, cause: cause)
        }
        let raw: [UInt8]
        do {
            raw = try decode(signature)
        } catch let failure as MalformedSignature {
            throw refuse(.malformed(detail: failure.detail))
        }
        defer { ERR_clear_error() }
        guard let context = try? DigestContext(name: trustedKey.name) else { throw refuse(.malformed(detail: "out of memory")) }
        guard EVP_DigestVerifyInit(context.pointer, nil, nil, nil, trustedKey.key.pointer) == 1 else {
            throw refuse(.malformed(detail: "OpenSSL cannot verify with this key: " + openSSLErrors()))
        }
        let status = withNonEmptyBytes(manifest) { base, count in
            EVP_DigestVerify(context.pointer, raw, raw.count, base, count)
        }
        guard status == 1 else { throw refuse(.mismatch) }
    }

    struct MalformedSignature: Error { var detail: String }

    /// The 64 raw bytes of a signature file, or ``MalformedSignature``.
    static func decode(_ file: [UInt8]) throws -> [UInt8] {
        guard file.count <= maxFileSize else {
            throw MalformedSignature(detail: "\(file.count) bytes; a signature file has one line of 88 base64 characters")
        }
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        guard let first = file.firstIndex(where: { !isSpace($0) }), let last = file.lastIndex(where: { !isSpace($0) }) else {
            throw MalformedSignature(detail: "it is empty")
        }
        let text = file[first...last]
        guard let raw = Base64.decode(text) else {
            throw MalformedSignature(detail: "not base64 (expected one line of 88 base64 characters)")
        }
        guard raw.count == byteCount else {
            throw MalformedSignature(detail: "\(raw.count) bytes after base64 decoding; an Ed25519 signature has \(byteCount)")
        }
        return raw
    }
}

/// Standard base64 with padding (RFC 4648 §4). Hand-written because it is twenty lines, strict
/// (no line breaks, no missing padding, no stray characters), and testable without OpenSSL's BIO chains.
enum Base64 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i], b1 = i + 1 < bytes.count ? bytes[i + 1] : 0, b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(i + 1 < bytes.count ? alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)] : 0x3D)
            out.append(i + 2 < bytes.count ? alphabet[Int(b2 & 0x3F)] : 0x3D)
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Nil unless `text` is whole groups of four characters, `=` only as final padding.
    static func decode<C: Collection>(_ text: C) -> [UInt8]? where C.Element == UInt8 {
        let chars = Array(text)
        guard !chars.isEmpty, chars.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 4 * 3)
        var index = 0
        while index < chars.count {
            let isLast = index + 4 == chars.count
            var values: [UInt8] = []
            var padding = 0
            for c in chars[index..<index + 4] {
                if c == 0x3D {
                    guard isLast else { return nil }
                    padding += 1
                    continue
                }
                guard padding == 0, let v = value(of: c) else { return nil }
                values.append(v)
            }
            guard padding <= 2 else { return nil }
            out.append(values[0] << 2 | values[1] >> 4)
            if values.count > 2 { out.append(values[1] << 4 | values[2] >> 2) }
            if values.count > 3 { out.append(values[2] << 6 | values[3]) }
            index += 4
        }
        return out
    }

    static func value(of c: UInt8) -> UInt8? {
        switch c {
        case 0x41...0x5A: return c - 0x41
        case 0x61...0x7A: return c - 0x61 + 26
        case 0x30...0x39: return c - 0x30 + 52
        case 0x2B: return 62
        case 0x2F: return 63
        default: return nil
        }
    }
}
