import COpenSSL
import MirrorFS
import MirrorKit

#if canImport(Glibc)
import Glibc
#endif

/// A key file that cannot be used: the operator named the wrong file or the wrong kind of key.
///
/// These are usage errors (exit 64 in the executable), not manifest errors: nothing is wrong with
/// the manifest, and retrying with the same options cannot succeed.
public struct SignatureKeyError: Error, CustomStringConvertible, Equatable, Sendable {
    /// The key file as the user named it.
    public var file: String
    public var message: String

    public init(file: String, message: String) {
        self.file = file
        self.message = message
    }

    /// `FILE: message`.
    public var description: String { "\(file): \(message)" }
}

/// An Ed25519 public key that manifests must be signed with (`mirror sync --trust PUB.pem`).
///
/// Read from a PEM `PUBLIC KEY` block (SubjectPublicKeyInfo, what `openssl pkey -pubout` writes)
/// with `PEM_read_bio_PUBKEY`. Only Ed25519 is accepted: one algorithm with no parameters leaves
/// nothing to negotiate or misconfigure (no hash choice, no padding, no curve).
public struct TrustedKey: Sendable {
    let key: EVPKey
    /// The key file's name for messages.
    public let name: String

    /// Reads the PEM file at `path`.
    public static func load(path: String) throws -> TrustedKey {
        try TrustedKey(pem: readKeyFile(path), name: path)
    }

    /// `--trust`, given once or more: each a key file, or a folder whose regular files ending in
    /// `.pem` or `.pub` are each a key (sorted by name; anything else in it is ignored, and a
    /// folder with no key is a usage error). Any one of the keys may have signed the manifest.
    public static func load(paths: [String]) throws -> [TrustedKey] {
        var keys: [TrustedKey] = []
        for path in paths {
            var status = stat()
            guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
                keys.append(try load(path: path))
                continue
            }
            let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else {
                throw SignatureKeyError(file: path, message: "cannot read the folder: " + String(cString: strerror(errno)))
            }
            let folder = FileDescriptor(fd: fd, displayPath: path)
            defer { folder.close() }
            let names: [String]
            do {
                names = try folder.entryNames().map { String(decoding: $0, as: UTF8.self) }
                    .filter { $0.hasSuffix(".pem") || $0.hasSuffix(".pub") }
            } catch {
                throw SignatureKeyError(file: path, message: "cannot read the folder: \(error)")
            }
            let files = names.sorted().map { path + (path.hasSuffix("/") ? "" : "/") + $0 }.filter { file in
                var status = stat()
                return stat(file, &status) == 0 && status.st_mode & S_IFMT == S_IFREG
            }
            guard !files.isEmpty else {
                throw SignatureKeyError(file: path, message: "a folder with no key (no file ending in .pem or .pub)")
            }
            for file in files { keys.append(try load(path: file)) }
        }
        return keys
    }

    /// Parses PEM text already in memory; `name` is used in messages.
    public init(pem: [UInt8], name: String) throws {
        key = try EVPKey.read(pem: pem, name: name, kind: .publicKey)
        self.name = name
    }
}

/// An Ed25519 private key for `mirror manifest sign` (PEM `PRIVATE KEY`, PKCS #8, what
/// `openssl genpkey -algorithm ed25519` writes), read with `PEM_read_bio_PrivateKey`.
public struct SigningKey: Sendable {
    let key: EVPKey
    public let name: String

    public static func load(path: String) throws -> SigningKey {
        try SigningKey(pem: readKeyFile(path), name: path)
    }

    public init(pem: [UInt8], name: String) throws {
        key = try EVPKey.read(pem: pem, name: name, kind: .privateKey)
        self.name = name
    }

    /// The 64-byte Ed25519 signature (RFC 8032) of `message`, with `EVP_DigestSignInit` (no digest:
    /// Ed25519 hashes internally) and one-shot `EVP_DigestSign`.
    public func sign(_ message: [UInt8]) throws -> [UInt8] {
        let context = try DigestContext(name: name)
        guard EVP_DigestSignInit(context.pointer, nil, nil, nil, key.pointer) == 1 else {
            throw SignatureKeyError(file: name, message: "cannot sign with this key: " + openSSLErrors())
        }
        var signature = [UInt8](repeating: 0, count: ManifestSignature.byteCount)
        var length = signature.count
        let status = withNonEmptyBytes(message) { base, count in
            EVP_DigestSign(context.pointer, &signature, &length, base, count)
        }
        guard status == 1, length == ManifestSignature.byteCount else {
            throw SignatureKeyError(file: name, message: "signing failed: " + openSSLErrors())
        }
        return signature
    }
}

/// Owns one `EVP_PKEY` (freed with `EVP_PKEY_free`).
///
/// Sendable, unchecked: `pointer` is set in `init` and never changed, and nothing changes the key
/// after loading; OpenSSL lets threads use one key at once for what only reads it
/// (openssl-threads(7)), and each sign or verify here has an `EVP_MD_CTX` of its own
/// (``DigestContext``). Needed for ``TrustedKey``, ``SigningKey`` and ``ManifestTrust``, public
/// `Sendable` values that hold a key.
final class EVPKey: @unchecked Sendable {
    enum Kind { case publicKey, privateKey }

    let pointer: OpaquePointer

    private init(_ pointer: OpaquePointer) { self.pointer = pointer }

    deinit { EVP_PKEY_free(pointer) }

    /// Decodes the first PEM block of the kind asked for and checks that it is an Ed25519 key.
    static func read(pem: [UInt8], name: String, kind: Kind) throws -> EVPKey {
        defer { ERR_clear_error() }
        let bio = try MemoryBIO(pem, name: name)
        // A callback that refuses to give a pass phrase: with a NULL callback, OpenSSL would prompt
        // on the terminal for an encrypted key, which would hang a cron job.
        let loaded: OpaquePointer?
        switch kind {
        case .publicKey: loaded = PEM_read_bio_PUBKEY(bio.pointer, nil, { _, _, _, _ in -1 }, nil)
        case .privateKey: loaded = PEM_read_bio_PrivateKey(bio.pointer, nil, { _, _, _, _ in -1 }, nil)
        }
        guard let loaded else {
            let text = String(decoding: pem.prefix(64 * 1024), as: UTF8.self)
            switch kind {
            case .publicKey:
                if text.contains("PRIVATE KEY-----") {
                    throw SignatureKeyError(file: name, message: "this is a private key; --trust takes the public key (openssl pkey -in KEY.pem -pubout)")
                }
                throw SignatureKeyError(file: name, message: "not a PEM public key (expected a \"-----BEGIN PUBLIC KEY-----\" block of an Ed25519 key)")
            case .privateKey:
                if text.contains("ENCRYPTED PRIVATE KEY-----") {
                    throw SignatureKeyError(file: name, message: "the private key is encrypted; mirror reads unencrypted PKCS #8 keys only (openssl pkey -in KEY.pem -out PLAIN.pem)")
                }
                if text.contains("PUBLIC KEY-----") {
                    throw SignatureKeyError(file: name, message: "this is a public key; signing needs the private key")
                }
                throw SignatureKeyError(file: name, message: "not a PEM private key (expected a \"-----BEGIN PRIVATE KEY-----\" block of an Ed25519 key, as openssl genpkey -algorithm ed25519 writes)")
            }
        }
        let key = EVPKey(loaded)
        guard EVP_PKEY_get_base_id(loaded) == EVP_PKEY_ED25519 else {
            let type = EVP_PKEY_get0_type_name(loaded).map { String(cString: $0) } ?? "unknown"
            throw SignatureKeyError(file: name, message: "an \(type) key; signed manifests use Ed25519 keys only (openssl genpkey -algorithm ed25519)")
        }
        return key
    }
}

/// Owns one read-only memory `BIO` (`BIO_new_mem_buf`, freed with `BIO_free`) over a copy of the
/// bytes it reads, so the buffer outlives every read.
final class MemoryBIO {
    let pointer: OpaquePointer
    private let storage: UnsafeMutableBufferPointer<UInt8>

    init(_ bytes: [UInt8], name: String) throws {
        storage = .allocate(capacity: max(bytes.count, 1))
        _ = storage.initialize(from: bytes)
        guard bytes.count <= Int(Int32.max), let bio = BIO_new_mem_buf(storage.baseAddress, Int32(bytes.count)) else {
            storage.deallocate()
            throw SignatureKeyError(file: name, message: "cannot read the key: out of memory or file too large")
        }
        pointer = bio
    }

    deinit {
        BIO_free(pointer)
        storage.deallocate()
    }
}

/// Owns one `EVP_MD_CTX` (`EVP_MD_CTX_new` / `EVP_MD_CTX_free`); one per signature or verification.
final class DigestContext {
    let pointer: OpaquePointer

    init(name: String) throws {
        guard let context = EVP_MD_CTX_new() else {
            throw SignatureKeyError(file: name, message: "cannot allocate an OpenSSL context: out of memory")
        }
        pointer = context
    }

    deinit { EVP_MD_CTX_free(pointer) }
}

/// OpenSSL's queued error messages for this thread, then clears the queue (`ERR_get_error`).
func openSSLErrors() -> String {
    var messages: [String] = []
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        messages.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return messages.isEmpty ? "no detail from OpenSSL" : messages.joined(separator: "; ")
}

/// Calls `body` with a valid pointer even for an empty message (an empty array may have no base
/// address, and OpenSSL's one-shot calls want a pointer).
func withNonEmptyBytes<R>(_ bytes: [UInt8], _ body: (UnsafePointer<UInt8>, Int) -> R) -> R {
    bytes.withUnsafeBufferPointer { buffer in
        if let base = buffer.baseAddress, buffer.count > 0 { return body(base, buffer.count) }
        return withUnsafePointer(to: UInt8(0)) { body($0, 0) }
    }
}

/// A key file is small; anything larger than 64 KiB is not a key and is refused before reading more.
func readKeyFile(_ path: String) throws -> [UInt8] {
    let bytes: [UInt8]
    do {
        bytes = try WholeFile.read(path, limit: 64 * 1024)
    } catch let failure as WholeFile.Failure {
        if failure.errno == EFBIG {
            throw SignatureKeyError(file: path, message: "cannot read key: larger than 64 KiB, so not a PEM key")
        }
        throw SignatureKeyError(file: path, message: "cannot read key: " + String(cString: strerror(failure.errno)))
    }
    return bytes
}
