import MirrorFS
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// The OpenPGP signature of a published checksum list or Metalink file, checked by `gpgv`, the
/// verifier apt uses: mirror reads no OpenPGP packet itself (docs/signing.md, "Checksum lists
/// and Metalink signed with OpenPGP").
///
/// `gpgv --homedir TMP --keyring KEYRING --status-fd 1 SIGNATURE DATA` for a detached signature
/// (`SHA256SUMS.gpg`, `.sign`, `.asc`), and `--output TMP/text CLEARSIGNED` for a clearsigned
/// file, whose signed text is then what the run reads. The verdict comes from gpgv's status lines
/// (GnuPG's `doc/DETAILS`, "Format of the status codes"), a machine interface, as apt's
/// `apt-key verify` reads them: accepted only with exit 0, `GOODSIG` and `VALIDSIG`, and none of
/// `BADSIG`, `ERRSIG`, `EXPSIG`, `EXPKEYSIG` or `REVKEYSIG`. gpgv's own words go into the message.
public enum OpenPGPCheck {
    /// A good signature: when it was made (Unix seconds, `VALIDSIG`'s signature timestamp), which a
    /// destination holds later lists to (docs/signing.md, "Checksum lists and Metalink signed with
    /// OpenPGP": a mirror serving an older signed list is refused).
    public struct Good: Equatable, Sendable {
        public var signedAt: Int64
    }

    /// A detached signature over `data`.
    @discardableResult
    public static func verify(data: [UInt8], signature: [UInt8], keyring: OpenPGPKeyring, dataName: String, signatureName: String) throws -> Good {
        let work = try Scratch()
        defer { work.remove() }
        try work.write("data", data)
        try work.write("signature", signature)
        let result = try run(keyring: keyring, work: work, arguments: [work.path("signature"), work.path("data")])
        return try judge(result, signed: dataName, signature: signatureName, keyring: keyring)
    }

    /// A clearsigned file: returns the signed text, as gpgv wrote it.
    public static func verifyClearSigned(_ bytes: [UInt8], keyring: OpenPGPKeyring, name: String) throws -> (text: [UInt8], good: Good) {
        let work = try Scratch()
        defer { work.remove() }
        try work.write("clearsigned", bytes)
        let result = try run(keyring: keyring, work: work, arguments: ["--output", work.path("text"), work.path("clearsigned")])
        let good = try judge(result, signed: name, signature: name + " (clearsigned)", keyring: keyring)
        do { return (try WholeFile.read(work.path("text")), good) } catch {
            throw OpenPGPError(signed: name, signature: name, keyring: keyring.path, cause: .unreadable("gpgv wrote no signed text"))
        }
    }

    struct Result {
        var exitStatus: Int32
        var status: [String]
        var messages: String
    }

    static func judge(_ result: Result, signed: String, signature: String, keyring: OpenPGPKeyring) throws -> Good {
        var codes: [String: [String]] = [:]
        for line in result.status {
            let words = line.split(separator: " ").map(String.init)
            guard words.count >= 2, words[0] == "[GNUPG:]" else { continue }
            codes[words[1]] = Array(words.dropFirst(2))
        }
        func refuse(_ cause: OpenPGPError.Cause) -> OpenPGPError {
            OpenPGPError(signed: signed, signature: signature, keyring: keyring.path, cause: cause)
        }
        if let key = codes["NO_PUBKEY"]?.first { throw refuse(.unknownKey(key)) }
        if codes["BADSIG"] != nil { throw refuse(.mismatch) }
        if let key = codes["EXPKEYSIG"]?.first { throw refuse(.expiredKey(key)) }
        if let key = codes["REVKEYSIG"]?.first { throw refuse(.revokedKey(key)) }
        if codes["EXPSIG"] != nil { throw refuse(.expiredSignature) }
        if codes["NODATA"] != nil || codes["ERRSIG"] != nil { throw refuse(.unreadable(result.messages)) }
        guard result.exitStatus == 0, codes["GOODSIG"] != nil, let valid = codes["VALIDSIG"], valid.count >= 3 else {
            throw refuse(.unreadable(result.messages.isEmpty ? "gpgv exited with \(result.exitStatus)" : result.messages))
        }
        // VALIDSIG <fingerprint> <creation date> <signature timestamp> ... (GnuPG doc/DETAILS):
        // seconds since the epoch, or ISO 8601 (`20261207T101500`) under --fixed-list-mode.
        guard let signedAt = signatureTime(valid[2]) else {
            throw refuse(.unreadable("gpgv gave no signature time (VALIDSIG \(valid.joined(separator: " ")))"))
        }
        return Good(signedAt: signedAt)
    }

    /// A `VALIDSIG` signature timestamp: decimal seconds, or `YYYYMMDDTHHMMSS` in UTC.
    static func signatureTime(_ text: String) -> Int64? {
        if let seconds = Int64(text), seconds >= 0 { return seconds }
        let c = Array(text)
        guard c.count == 15, c[8] == "T", c.allSatisfy({ $0 == "T" || $0.isASCII && $0.isNumber }) else { return nil }
        let rfc3339 = String(c[0..<4]) + "-" + String(c[4..<6]) + "-" + String(c[6..<8]) + "T"
            + String(c[9..<11]) + ":" + String(c[11..<13]) + ":" + String(c[13..<15]) + "Z"
        guard case .success(let time) = RFC3339.parse(rfc3339) else { return nil }
        return time.seconds
    }

    /// Runs gpgv with its own empty home (it writes nothing to the runner's `~/.gnupg`, and a
    /// system user has none), its status on standard output and its messages on standard error.
    static func run(keyring: OpenPGPKeyring, work: Scratch, arguments: [String]) throws -> Result {
        let home: String
        do { home = try work.makeFolder("home") } catch {
            throw OpenPGPError(signed: "", signature: "", keyring: keyring.path, cause: .unreadable("cannot make gpgv's home folder: \(error)"))
        }
        let argv = [keyring.verifier, "--homedir", home, "--keyring", keyring.path, "--status-fd", "1"] + arguments
        let status = try Spawn.run(argv, stdout: work.path("status"), stderr: work.path("messages"))
        let out = (try? WholeFile.read(work.path("status"))) ?? []
        let err = (try? WholeFile.read(work.path("messages"))) ?? []
        let messages = String(decoding: err, as: UTF8.self).split(separator: "\n").map { $0.hasPrefix("gpgv: ") ? String($0.dropFirst(6)) : String($0) }
        return Result(exitStatus: status, status: String(decoding: out, as: UTF8.self).split(separator: "\n").map(String.init),
                      messages: messages.joined(separator: "; "))
    }
}

/// A keyring for `--keyring`: a file of OpenPGP public keys in binary form, as `gpg --export`
/// writes it and distributions ship them (`/usr/share/keyrings/*.gpg`), and the gpgv to check with.
public struct OpenPGPKeyring: Sendable, Equatable {
    /// Absolute: gpgv looks for a name without a slash in its home folder.
    public let path: String
    /// The gpgv program.
    public let verifier: String

    /// Checks `path` once, when the command line is read (exit 64 for each problem): it exists, it
    /// is not ASCII-armored (gpgv 2.2 reads binary keyrings only), and gpgv is installed.
    public static func load(path: String) throws -> OpenPGPKeyring {
        let head: [UInt8]
        do { head = Array(try WholeFile.read(path, limit: 64 << 20).prefix(64)) } catch let failure as WholeFile.Failure {
            throw KeyringError("--keyring \(path): cannot read it: \(String(cString: strerror(failure.errno)))")
        }
        if head.starts(with: Array("-----BEGIN PGP".utf8)) {
            throw KeyringError("--keyring \(path): the key is ASCII-armored; gpgv reads binary keyrings: "
                + "`gpg --dearmor < \(path) > \(path.hasSuffix(".asc") ? String(path.dropLast(4)) : path).gpg` makes one")
        }
        guard let verifier = ["/usr/bin/gpgv", "/bin/gpgv"].first(where: { access($0, X_OK) == 0 }) ?? Spawn.find("gpgv") else {
            throw KeyringError("--keyring needs gpgv, GnuPG's signature verifier, which is not installed (Debian: apt install gpgv)")
        }
        guard let absolute = CurrentFolder.absolute(path) else { throw KeyringError("--keyring \(path): cannot tell the current folder") }
        return OpenPGPKeyring(path: absolute, verifier: verifier)
    }
}

/// A `--keyring` that cannot be used: exit 64.
public struct KeyringError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// An OpenPGP signature that does not vouch for a published list: exit 65, before any request for files.
public struct OpenPGPError: Error, CustomStringConvertible, Sendable {
    public enum Cause: Sendable, Equatable {
        case missing([String])
        case mismatch
        case unknownKey(String)
        case expiredKey(String)
        case revokedKey(String)
        case expiredSignature
        case unreadable(String)
    }

    public var signed: String
    public var signature: String
    public var keyring: String
    public var cause: Cause

    package init(signed: String, signature: String, keyring: String, cause: Cause) {
        (self.signed, self.signature, self.keyring, self.cause) = (signed, signature, keyring, cause)
    }

    public var description: String {
        switch cause {
        case .missing(let tried):
            return "\(signed): refused: no OpenPGP signature found (tried \(tried.joined(separator: ", ")), and the list is not clearsigned); "
                + "with --keyring every list must be signed"
        case .mismatch:
            return "\(signed): refused: the signature \(signature) does not match it (BADSIG): the list was changed after it was signed, or the signature is of another file"
        case .unknownKey(let key):
            return "\(signed): refused: \(signature) was made by key \(key), which is not in --keyring \(keyring)"
        case .expiredKey(let key):
            return "\(signed): refused: \(signature) was made by key \(key), which has expired"
        case .revokedKey(let key):
            return "\(signed): refused: \(signature) was made by key \(key), which has been revoked"
        case .expiredSignature:
            return "\(signed): refused: the signature \(signature) has expired"
        case .unreadable(let why):
            return "\(signed): refused: gpgv could not check \(signature): \(why)"
        }
    }
}
