import MirrorFS
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// What `mirror sync --trust PUB.pem [--trust NEW.pem …] [--signature PATH]` asks for: a manifest
/// is used only if its detached signature verifies with one of these keys. More than one key is
/// how a publisher rotates its key with no day on which machines refuse (docs/signing.md,
/// "Rotating the key"): machines trust the old and the new key, the publisher signs with the new
/// one, and the old key is then dropped from the machines.
public struct ManifestTrust: Sendable {
    /// At least one.
    public var keys: [TrustedKey]
    /// The signature file; nil means the manifest's path + `.sig`.
    public var signaturePath: String?

    public init(keys: [TrustedKey], signaturePath: String? = nil) {
        self.keys = keys
        self.signaturePath = signaturePath
    }

    public init(key: TrustedKey, signaturePath: String? = nil) {
        self.init(keys: [key], signaturePath: signaturePath)
    }

    /// The key files as named in messages: one name, or the names joined.
    public var keyNames: String { keys.map(\.name).joined(separator: ", ") }

    /// Checks `signature` over `bytes` against each key in turn: the first that verifies wins. A
    /// malformed signature is malformed whatever the key; a mismatch with every key names them all.
    public func verify(_ bytes: [UInt8], signature: [UInt8], manifestName: String, signatureName: String) throws {
        var mismatch: SignatureError?
        for key in keys {
            do {
                try ManifestSignature.verify(manifest: bytes, signature: signature, trustedKey: key,
                                             manifestName: manifestName, signatureName: signatureName)
                return
            } catch let error as SignatureError where error.cause == .mismatch {
                mismatch = error
            }
        }
        throw SignatureError(manifest: manifestName, signature: signatureName, key: keyNames,
                             cause: mismatch?.cause ?? .mismatch)
    }
}

extension ManifestLoader {
    /// Reads the manifest once, checks its signature over exactly the bytes read, and only then
    /// parses those same bytes: the file cannot change between the check and its use, and a
    /// manifest that is not trusted never reaches the YAML parser. Throws ``SignatureError`` for a
    /// missing, malformed or wrong signature, ``ManifestError`` for an unreadable or invalid manifest.
    public static func load(path: String, displayName: String? = nil, trust: ManifestTrust) throws -> Manifest {
        try loadVerified(path: path, displayName: displayName, trust: trust).manifest
    }

    /// The same, with the SHA-256 of the bytes verified and parsed (lowercase hex): what a DEST
    /// records with the manifest's serial (docs/signing.md, "Versions"), of these bytes and not of
    /// the file read again, which may have changed since.
    public static func loadVerified(path: String, displayName: String? = nil, trust: ManifestTrust) throws -> (manifest: Manifest, sha256: String) {
        let name = displayName ?? path
        let bytes: [UInt8]
        do {
            bytes = try WholeFile.read(path)
        } catch let code as WholeFile.Failure {
            throw ManifestError(file: name, message: "cannot read manifest: " + String(cString: strerror(code.errno)), cannotRead: true)
        }
        let signaturePath = trust.signaturePath ?? ManifestSignature.defaultPath(for: path)
        let signature = try ManifestTrust.readSignature(signaturePath, manifestName: name, trust: trust)
        try trust.verify(bytes, signature: signature, manifestName: name, signatureName: signaturePath)
        let manifest = try parse(bytes, sourceName: name)
        return (manifest, Hasher.digest(.sha256, of: bytes).hex)
    }
}

extension ManifestSignature {
    /// `mirror manifest sign`: signs the file at `manifestPath` as stored and writes the signature
    /// file to `outputPath` (default `MANIFEST.sig`), replacing it atomically (a temporary file in
    /// the same folder, `fsync`, `rename`) so a reader never sees half a signature. The manifest
    /// must be valid (``ManifestError`` otherwise): signing a file `mirror sync` would refuse
    /// anyway is a mistake worth catching. Returns the path written.
    @discardableResult
    public static func signFile(manifestPath: String, key: SigningKey, outputPath: String? = nil) throws -> String {
        let bytes: [UInt8]
        do {
            bytes = try WholeFile.read(manifestPath)
        } catch let code as WholeFile.Failure {
            throw ManifestError(file: manifestPath, message: "cannot read manifest: " + String(cString: strerror(code.errno)), cannotRead: true)
        }
        _ = try ManifestLoader.parse(bytes, sourceName: manifestPath)
        let text = try sign(manifest: bytes, key: key)
        let output = outputPath ?? defaultPath(for: manifestPath)
        let temporary = output + ".tmp-\(getpid())"
        let fd = retryingOnEINTR { open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644) }
        guard fd >= 0 else { throw SystemError("create", temporary) }
        let file = FileDescriptor(fd: fd, displayPath: temporary)
        do {
            try file.append(text)
            try file.sync()
            file.close()
            guard rename(temporary, output) == 0 else { throw SystemError("rename to \(output)", temporary) }
        } catch {
            file.close()
            unlink(temporary)
            throw error
        }
        return output
    }
}

extension ManifestTrust {
    /// A signature file from the disk (`--signature`, or beside a local manifest), bounded: one
    /// that cannot be read is missing, one too large is malformed.
    static func readSignature(_ path: String, manifestName: String, trust: ManifestTrust) throws -> [UInt8] {
        do {
            return try WholeFile.read(path, limit: ManifestSignature.maxFileSize)
        } catch let code as WholeFile.Failure {
            let cause: SignatureError.Cause = code.errno == EFBIG
                ? .malformed(detail: "larger than \(ManifestSignature.maxFileSize) bytes; a signature file has one line of 88 base64 characters")
                : .missing(detail: String(cString: strerror(code.errno)))
            throw SignatureError(manifest: manifestName, signature: path, key: trust.keyNames, cause: cause)
        }
    }

    /// The check `RemoteManifest.load(url:destination:settings:saveCopy:verify:)` runs for
    /// `--trust`: the fetched (or saved) bytes against `<URL>.sig` as fetched with them, or against
    /// `--signature PATH` when given.
    public static func remoteCheck(_ trust: ManifestTrust, url: String) -> ([UInt8], [UInt8]?) throws -> Void {
        let name = redactedURL(url)
        return { bytes, fetchedSignature in
            var signatureName = name + ".sig"
            var signature = fetchedSignature
            if let path = trust.signaturePath {
                signatureName = path
                signature = try readSignature(path, manifestName: name, trust: trust)
            }
            guard let signature else {
                throw SignatureError(manifest: name, signature: signatureName, key: trust.keyNames,
                                     cause: .missing(detail: "the server has no signature file for it"))
            }
            try trust.verify(bytes, signature: signature, manifestName: name, signatureName: signatureName)
        }
    }
}
