import MirrorFS
import MirrorKit
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// The manifests publishers already ship, made into what a run reads (docs/manifest.md,
/// "Checksum lists" and "Metalink"): a `SHA256SUMS` or `SHA512SUMS` list becomes a YAML manifest
/// once the server has told each file's size; a Metalink file is read as it is. With `--keyring`
/// their OpenPGP signature is checked by gpgv first (``OpenPGPCheck``).
///
/// Which signature applies to what (docs/signing.md): `--trust` (Ed25519, `.sig`) to mirror's own
/// YAML manifests, `--keyring` (OpenPGP) to checksum lists and Metalink files. An input that the
/// options given cannot check is refused: a YAML manifest with only `--keyring`, a list with only
/// `--trust`. So a mirror cannot dodge the check by serving the other format.
///
/// A YAML manifest comes back unchanged, byte for byte.
enum PublishedList {
    /// Where the input was read from: its signatures and its files are beside it.
    enum Place {
        case remote(url: String, settings: TransferSettings)
        case local(path: String)

        var name: String {
            switch self {
            case .remote(let url, _): redactedURL(url)
            case .local(let path): path
            }
        }

        /// The folder the list's names are relative to, as a URL ending in `/`.
        var base: String? {
            switch self {
            case .remote(let url, _):
                return URLReference.resolve("./", against: url)
            case .local(let path):
                guard let absolute = CurrentFolder.absolute(path) else { return nil }
                let folder = absolute.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
                return "file://" + URLReference.encodePath(folder) + "/"
            }
        }

        /// A detached signature beside the input: its bytes, or nil when there is none.
        func signature(_ suffix: String) -> [UInt8]? {
            switch self {
            case .remote(let url, let settings):
                guard let response = try? SmallFetch.get(url + suffix, validators: nil, limit: 1 << 20, settings: settings, revalidate: true),
                      response.isSuccess, !response.body.isEmpty else { return nil }
                return response.body
            case .local(let path):
                return try? WholeFile.read(path + suffix, limit: 1 << 20)
            }
        }
    }

    /// Whether `bytes` are a checksum list or a Metalink file rather than a YAML manifest.
    static func isPublished(_ bytes: [UInt8]) -> Bool {
        Metalink.looksLike(bytes) || ChecksumList.looksLike(bytes)
    }

    /// The first line of the YAML manifest made of a checksum list (``manifest(of:place:verified:)``).
    static let madeMarker = "# Made by mirror from "

    /// A local path's manifest when it is a list or a Metalink file, or `--keyring` is given:
    /// its bytes as ``prepare(_:place:trusted:keyring:)`` makes them; nil for a YAML manifest
    /// the usual readers take (they read large ones in pieces).
    static func prepareLocal(_ path: String, trusted: Bool, keyring: OpenPGPKeyring?,
                             admit: ((KeptPublishedCopy.Signed) throws -> Void)? = nil) throws -> [UInt8]? {
        // The first 4 KiB tell the format; a file that cannot be read is left to the usual reader's message.
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var head = [UInt8](repeating: 0, count: 4096)
        let count = head.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        close(fd)
        head = Array(head.prefix(max(0, count)))
        guard isPublished(head) || (keyring != nil && !trusted) else { return nil }
        let bytes: [UInt8]
        do { bytes = try WholeFile.read(path, limit: Metalink.sizeLimit) } catch let failure as WholeFile.Failure {
            let why = failure.errno == EFBIG ? "larger than \(Metalink.sizeLimit >> 20) MiB" : String(cString: strerror(failure.errno))
            throw ManifestError(file: path, message: "cannot read manifest: " + why, cannotRead: failure.errno != EFBIG)
        }
        return try prepare(bytes, place: .local(path: path), trusted: trusted, keyring: keyring, admit: admit)
    }

    /// The detached signatures tried, in order: Ubuntu's `SHA256SUMS.gpg`, Debian's
    /// `SHA256SUMS.sign`, and `.asc`, the armored form most other publishers use.
    static let signatureSuffixes = [".gpg", ".sign", ".asc"]

    /// What a run reads in place of `bytes`: the same bytes for a YAML manifest or a Metalink
    /// file, a YAML manifest for a checksum list. Throws ``OpenPGPError`` or ``PublishedListError``
    /// (exit 65; 75 when the server could not be asked), ``ManifestError`` for a list that breaks
    /// the rules. `trusted`: `--trust` was given. `admit`: asked of a good signature before the
    /// sizes are asked, to refuse one older than the destination accepted (``SerialGate``).
    static func prepare(_ bytes: [UInt8], place: Place, trusted: Bool, keyring: OpenPGPKeyring?,
                        admit: ((KeptPublishedCopy.Signed) throws -> Void)? = nil) throws -> [UInt8] {
        let isMetalink = Metalink.looksLike(bytes)
        let isList = !isMetalink && ChecksumList.looksLike(bytes)
        guard isMetalink || isList else {
            if keyring != nil && !trusted { throw PublishedListError.notApplicable(place.name, keyring: true) }
            // Mirror's own marks are never taken from the network (KeptPublishedCopy).
            if bytes.starts(with: madeMarker.utf8) { throw PublishedListError.forgedMark(place.name) }
            return bytes
        }
        if isMetalink, KeptPublishedCopy.isMarkedVerified(bytes) {
            throw PublishedListError.forgedMark(place.name)
        }
        var text = bytes
        var signed: KeptPublishedCopy.Signed?
        if let keyring {
            let good: OpenPGPCheck.Good
            if ClearSigned.isClearSigned(bytes) {
                (text, good) = try OpenPGPCheck.verifyClearSigned(bytes, keyring: keyring, name: place.name)
            } else {
                var found: (suffix: String, bytes: [UInt8])?
                for suffix in signatureSuffixes {
                    if let signature = place.signature(suffix) { found = (suffix, signature); break }
                }
                guard let found else {
                    throw OpenPGPError(signed: place.name, signature: "", keyring: keyring.path,
                                       cause: .missing(signatureSuffixes.map { place.name + $0 }))
                }
                good = try OpenPGPCheck.verify(data: bytes, signature: found.bytes, keyring: keyring, dataName: place.name,
                                               signatureName: place.name + found.suffix)
            }
            signed = KeptPublishedCopy.Signed(signedAt: good.signedAt, sha256: Hasher.digest(.sha256, of: text).hex)
            // Held to the newest signature this destination accepted before anything else is asked.
            if let signed, let admit { try admit(signed) }
        } else if trusted {
            throw PublishedListError.notApplicable(place.name, keyring: false)
        } else if ClearSigned.isClearSigned(bytes) {
            guard let inner = ClearSigned.text(of: bytes) else {
                throw ManifestError(file: place.name, message: "the clearsigned text has no \"-----BEGIN PGP SIGNATURE-----\" line after it")
            }
            text = inner
        }
        if isMetalink { return signed.map { KeptPublishedCopy.markVerified(metalink: text, $0) } ?? text }
        let list = try ChecksumList.parse(text, sourceName: place.name)
        return try manifest(of: list, place: place, signed: signed)
    }

    /// The YAML manifest of `list`: `base_url` its folder, each size as the server tells it.
    /// `signed`: its OpenPGP signature was checked, which its first line then says, and its
    /// time is the manifest's `serial` (``SerialGate``).
    static func manifest(of list: ChecksumList, place: Place, signed: KeptPublishedCopy.Signed?) throws -> [UInt8] {
        guard let base = place.base else { throw PublishedListError.noBase(place.name) }
        let unknown = list.files.indices.filter { list.files[$0].size == nil }
        var sizes = list.files.map(\.size)
        if !unknown.isEmpty {
            let urls = unknown.compactMap { URLReference.resolve(URLReference.encodePath(list.files[$0].path), against: base) }
            guard urls.count == unknown.count else { throw PublishedListError.noBase(place.name) }
            let settings: TransferSettings
            switch place {
            case .remote(_, let given): settings = given
            case .local: settings = TransferSettings()
            }
            let answers = try SizeProbe.sizes(of: urls, settings: settings)
            var problems: [(String, SizeProbe.Answer)] = []
            for (index, answer) in zip(unknown, answers) {
                if case .size(let size) = answer, size <= ManifestEntry.largestSize { sizes[index] = size } else {
                    problems.append((list.files[index].path, answer))
                }
            }
            if StopSignal.received != 0 { throw PublishedListError.interrupted(place.name) }
            if !problems.isEmpty { throw PublishedListError.sizes(place.name, problems.map { ($0.0, $0.1) }) }
        }
        var out = madeMarker + "\(place.name) (\(list.algorithm.name), sizes as the server said"
            + (signed.map { "; \(KeptPublishedCopy.note($0)))\n" } ?? ")\n") + "version: 1\n"
        if let signed { out += "serial: \(signed.signedAt)\n" }
        out += "base_url: \(ManifestWriter.quoted(base))\nfiles:\n"
        for (file, size) in zip(list.files, sizes) {
            out += "  - path: \(ManifestWriter.quoted(file.path))\n    size: \(size ?? 0)\n    \(list.algorithm.name): \(file.digest.hex)\n"
        }
        return Array(out.utf8)
    }
}

extension SyncSession {
    /// The manifest at a local path for `status` and `verify`, which check no signature: a YAML
    /// manifest, a Metalink file, or a checksum list made into one (its sizes asked of the
    /// server, or of the disk for a list beside its files).
    public static func readLocalManifest(_ path: String) throws -> Manifest {
        if let prepared = try PublishedList.prepareLocal(path, trusted: false, keyring: nil) {
            return try ManifestLoader.parse(prepared, sourceName: path)
        }
        return try ManifestLoader.load(path: path)
    }
}

/// A published list that cannot be made into a manifest.
enum PublishedListError: Error, CustomStringConvertible {
    /// The options given check no signature of this format.
    case notApplicable(String, keyring: Bool)
    /// Some files' sizes could not be learned: the run must not start (the space check, and a
    /// `--delete` that would remove what it cannot describe).
    case sizes(String, [(path: String, answer: SizeProbe.Answer)])
    case noBase(String)
    case interrupted(String)
    /// Bytes from the network that carry the mark mirror writes on what it checked.
    case forgedMark(String)

    /// 75 when the server could be asked again later (no answer, 5xx); 65 when it answered and
    /// the list does not match what it serves.
    var isTransient: Bool {
        switch self {
        case .sizes(_, let problems):
            return problems.contains { problem in
                switch problem.answer {
                case .failed: return true
                case .status(let code): return code >= 500 || code == 429
                case .size, .noLength: return false
                }
            }
        case .interrupted: return true
        case .notApplicable, .noBase, .forgedMark: return false
        }
    }

    var description: String {
        switch self {
        case .notApplicable(let name, true):
            return "\(name): refused: --keyring checks the OpenPGP signatures of checksum lists and Metalink files, and this is a YAML manifest; "
                + "give --trust with the publisher's Ed25519 key for it (docs/signing.md)"
        case .notApplicable(let name, false):
            return "\(name): refused: --trust checks mirror's own signed YAML manifests, and this is a checksum list or Metalink file; "
                + "give --keyring with the publisher's OpenPGP key for it (docs/signing.md)"
        case .sizes(let name, let problems):
            let shown = problems.prefix(5).map { path, answer -> String in
                let why: String = switch answer {
                case .noLength: "the server gives no length"
                case .status(let code): "the server answered \(code)"
                case .failed(let message): message
                case .size(let size): "a size of \(size) bytes is more than 2^62"
                }
                return "\(path): \(why)"
            }
            let more = problems.count > 5 ? " and \(problems.count - 5) more" : ""
            return "\(name): cannot learn the size of \(problems.count) listed file\(problems.count == 1 ? "" : "s") "
                + "(\(shown.joined(separator: "; "))\(more)); mirror needs every size before the first byte (the space check), "
                + "and syncs nothing of a list it cannot describe"
        case .noBase(let name):
            return "\(name): cannot tell the folder the list's names are relative to"
        case .interrupted(let name):
            return "\(name): interrupted while asking the sizes of the listed files"
        case .forgedMark(let name):
            return "\(name): refused: it carries the mark mirror writes on a manifest it made and checked itself "
                + "(\"\(PublishedList.madeMarker.dropFirst(2))\" or \"\(KeptPublishedCopy.verifiedNote)\"), which no published file may carry"
        }
    }
}
