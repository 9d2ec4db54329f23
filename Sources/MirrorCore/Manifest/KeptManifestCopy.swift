import MirrorFS
import MirrorKit
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

extension RemoteManifest {
    /// The last good copy of a remote manifest: `DEST/.mirror/manifest/` holds `last.yaml` (the
    /// bytes of the last manifest that was fetched and parsed, as served), `last.yaml.sig` (its
    /// signature, when it had one) and `last.validators` (`url`, `etag`, `last-modified`,
    /// `sha256` of `last.yaml`, `signature-sha256` of `last.yaml.sig`, `confirmed`: Unix time the
    /// server last said the copy is current (a 304), `noted`: when a run last said on standard error
    /// that it used the copy (``SavedCopyNotice``); one per line, tab-separated).
    ///
    /// Whoever can write in DEST can write here too (SECURITY.md, "A local user who can write in
    /// DEST"), so a copy is used only when all of these hold, and is otherwise discarded: not used,
    /// not an error, the manifest fetched again without validators (``read()`` says why):
    /// - `.mirror/manifest`, `last.yaml`, `last.validators` (and `last.yaml.sig`) belong to the
    ///   effective user that runs `mirror` and nobody else may write to them (`fstat`: `st_uid` is
    ///   `geteuid()`, no group or other write bit). Another user can rename a folder they can
    ///   write in, but cannot make a file or folder of theirs belong to this user.
    /// - `last.yaml`'s SHA-256 is the one recorded in `last.validators` when the copy was written,
    ///   and so is the signature's (a copy paired with a file of another fetch, after a crash
    ///   between two renames, or edited by hand, is not used).
    ///
    /// The digest lives in `last.validators`, not in the journal: the manifest is loaded before
    /// the journal is opened (the manifest names the destination), and the two files are written
    /// in an order that is safe at every crash point: `last.yaml`, then `last.yaml.sig`, then
    /// `last.validators` (each replaced atomically by ``replaceFileAtomically(folder:name:bytes:mode:)``),
    /// so validators that describe the new copy never appear before it; old validators beside a
    /// new copy do not match its digest. All three files are mode 0600 whatever the umask.
    struct Cache {
        let destination: String
        var saving = true

        struct Saved {
            var bytes: [UInt8]
            var signature: [UInt8]?
            var validators: Validators
            var savedAt: Double?
            /// SHA-256 of `bytes` (checked against `last.validators` when read).
            var sha256: String
            var confirmed: Double?
            var noted: Double?

            /// Since when the copy is known current: the last 304, else when it was fetched.
            var current: Double? { [confirmed, savedAt].compactMap { $0 }.max() }

            var provenance: ManifestProvenance {
                ManifestProvenance(source: .savedCopy, sha256: sha256, etag: validators.etag, confirmed: current)
            }
        }

        /// A copy that is there and may be used, or why one that is there may not.
        enum Lookup {
            case none
            case usable(Saved)
            case discarded(String)

            var saved: Saved? {
                if case .usable(let saved) = self { return saved }
                return nil
            }
        }

        /// The file mode of everything kept here: it is this user's business only.
        static let fileMode: mode_t = 0o600

        func read() -> Lookup {
            guard let dest = try? Destination.openExisting(destination),
                  let folder = try? dest.stateFolder(RemoteManifest.folderName, create: false) else { return .none }
            let shown = folder.displayPath
            if let problem = Cache.ownershipProblem(folder, directory: true) { return .discarded("\(shown) \(problem)") }
            let copy: FileDescriptor
            switch Cache.open(folder, RemoteManifest.copyName) {
            case .missing: return .none
            case .failed(let why): return .discarded(why)
            case .opened(let file, let size):
                guard size <= RemoteManifest.sizeLimit else {
                    return .discarded("\(file.displayPath) is larger than \(Formatting.bytes(Int64(RemoteManifest.sizeLimit)))")
                }
                copy = file
            }
            guard let bytes = try? copy.readAll() else { return .discarded("\(copy.displayPath) cannot be read") }
            let savedAt = (try? copy.stat()).map { Double($0.mtime.seconds) }

            let validatorsFile: FileDescriptor
            switch Cache.open(folder, RemoteManifest.validatorsName) {
            case .missing: return .discarded("\(shown)/\(RemoteManifest.validatorsName) is missing")
            case .failed(let why): return .discarded(why)
            case .opened(let file, let size):
                guard size <= 64 * 1024 else { return .discarded("\(file.displayPath) is larger than 64 KiB") }
                validatorsFile = file
            }
            guard let text = try? validatorsFile.readAll() else { return .discarded("\(validatorsFile.displayPath) cannot be read") }
            let record = Record(parsing: text)
            guard let expected = record.sha256 else {
                return .discarded("\(validatorsFile.displayPath) records no sha256 for \(RemoteManifest.copyName)")
            }
            let actual = Cache.sha256(bytes)
            guard actual == expected else {
                return .discarded("\(copy.displayPath) has sha256 \(actual), but \(expected) was recorded when it was kept")
            }

            var signature: [UInt8]?
            switch Cache.open(folder, RemoteManifest.signatureName) {
            case .missing: break
            case .failed(let why): return .discarded(why)
            case .opened(let file, let size):
                guard size <= RemoteManifest.signatureLimit, let bytes = try? file.readAll() else {
                    return .discarded("\(file.displayPath) cannot be read")
                }
                signature = bytes
            }
            guard signature.map(Cache.sha256) == record.signatureSHA256 else {
                return .discarded("\(shown)/\(RemoteManifest.signatureName) is not the signature kept with \(RemoteManifest.copyName)")
            }
            return .usable(Saved(bytes: bytes, signature: signature, validators: record.validators, savedAt: savedAt,
                                 sha256: actual, confirmed: record.confirmed, noted: record.noted))
        }

        /// Replaces the copy: `last.yaml`, then the signature (or its removal), then
        /// `last.validators` with both digests, each atomically; the old validators stay until
        /// the new ones replace them. The folder is made private (0700) to this user. Returns why
        /// nothing was kept (a folder that belongs to someone else, which ``read()`` would refuse
        /// anyway), or nil.
        func write(bytes: [UInt8], signature: [UInt8]?, validators: Validators) throws -> String? {
            guard saving else { return nil }
            let dest = try Destination.create(destination)
            guard let folder = try dest.stateFolder(RemoteManifest.folderName, create: true) else {
                throw SystemError("create", dest.display(".mirror/manifest"), code: ENOENT)
            }
            _ = DiskChange.fchmod(folder.fd, 0o700)
            if let problem = Cache.ownershipProblem(folder, directory: true) {
                return "\(folder.displayPath) \(problem); the manifest is not kept there"
            }
            try replaceFileAtomically(folder: folder, name: RemoteManifest.copyName, bytes: bytes, mode: Cache.fileMode)
            if let signature {
                try replaceFileAtomically(folder: folder, name: RemoteManifest.signatureName, bytes: signature, mode: Cache.fileMode)
            } else {
                try Cache.remove(folder, RemoteManifest.signatureName)
            }
            let record = Record(validators: validators, sha256: Cache.sha256(bytes), signatureSHA256: signature.map(Cache.sha256))
            try replaceFileAtomically(folder: folder, name: RemoteManifest.validatorsName, bytes: record.text, mode: Cache.fileMode)
            return nil
        }

        /// Rewrites `last.validators` of the copy `saved` (read and checked just before) with
        /// `confirmed` or `noted` set, atomically; the copy itself is not touched. A failure is
        /// not the run's business (the time is only shown and used to say less): it is ignored.
        func mark(_ saved: Saved, confirmed: Double? = nil, noted: Double? = nil) {
            guard saving, let dest = try? Destination.openExisting(destination),
                  let folder = try? dest.stateFolder(RemoteManifest.folderName, create: false),
                  Cache.ownershipProblem(folder, directory: true) == nil else { return }
            var record = Record(validators: saved.validators, sha256: saved.sha256,
                                signatureSHA256: saved.signature.map(Cache.sha256))
            record.confirmed = confirmed ?? saved.confirmed
            record.noted = noted ?? saved.noted
            try? replaceFileAtomically(folder: folder, name: RemoteManifest.validatorsName, bytes: record.text, mode: Cache.fileMode)
        }

        /// Removes a kept copy that must not stay (one that holds a credential): the validators
        /// first, so that what is left is never used.
        func remove() throws {
            guard saving, let dest = try Destination.openExisting(destination),
                  let folder = try dest.stateFolder(RemoteManifest.folderName, create: false) else { return }
            for name in [RemoteManifest.validatorsName, RemoteManifest.copyName, RemoteManifest.signatureName] {
                try Cache.remove(folder, name)
            }
        }

        static func sha256(_ bytes: [UInt8]) -> String {
            Hasher.digest(.sha256, of: bytes).hex
        }

        enum Opened {
            case missing
            case failed(String)
            case opened(FileDescriptor, size: Int)
        }

        /// `openat` with `O_NOFOLLOW` (a link is refused, `ELOOP`) and `O_NONBLOCK` (a planted FIFO
        /// does not block the run), then `fstat`: a regular file of this user's that nobody else
        /// may write.
        static func open(_ folder: FileDescriptor, _ name: String) -> Opened {
            let shown = folder.displayPath + "/" + name
            let fd = retryingOnEINTR { openat(folder.fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
            if fd < 0 {
                if errno == ENOENT { return .missing }
                return .failed("\(shown) cannot be opened: \(String(cString: strerror(errno)))")
            }
            let file = FileDescriptor(fd: fd, displayPath: shown)
            guard let status = try? file.stat() else { return .failed("\(shown) cannot be inspected: \(String(cString: strerror(errno)))") }
            if let problem = ownershipProblem(status, directory: false) { return .failed("\(shown) \(problem)") }
            return .opened(file, size: Int(status.size))
        }

        /// Why the file or folder open at `file` may have been written by someone else, or nil.
        static func ownershipProblem(_ file: FileDescriptor, directory: Bool) -> String? {
            guard let status = try? file.stat() else { return "cannot be inspected: \(String(cString: strerror(errno)))" }
            return ownershipProblem(status, directory: directory)
        }

        /// The kind this copy needs, then ``StateOwnership/problem(_:)``, worded for a warning.
        static func ownershipProblem(_ status: FileStatus, directory: Bool) -> String? {
            if directory ? !status.isDirectory : !status.isRegularFile { return directory ? "is not a folder" : "is not a regular file" }
            switch StateOwnership.problem(status) {
            case nil: return nil
            case .owner(let owner): return "belongs to uid \(owner), not to uid \(geteuid()) that runs mirror"
            case .writableByOthers(let mode): return "may be written by others (mode \(String(mode, radix: 8)))"
            }
        }

        static func remove(_ folder: FileDescriptor, _ name: String) throws {
            if DiskChange.unlinkat(folder.fd, name, 0) != 0 && errno != ENOENT {
                throw SystemError("remove", folder.displayPath + "/" + name)
            }
        }
    }

    /// What `last.validators` holds. Lines with another key are ignored (and a value never holds a
    /// line break: libcurl splits header lines, and one that does is not written).
    struct Record {
        var validators = Validators(url: "", etag: nil, lastModified: nil)
        var sha256: String?
        var signatureSHA256: String?
        var confirmed: Double?
        var noted: Double?

        init(validators: Validators, sha256: String, signatureSHA256: String?) {
            self.validators = validators
            self.sha256 = sha256
            self.signatureSHA256 = signatureSHA256
        }

        init(parsing bytes: [UInt8]) {
            for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
                guard let tab = line.firstIndex(of: "\t") else { continue }
                let value = String(line[line.index(after: tab)...])
                switch line[..<tab] {
                case "url": validators.url = value
                case "etag": validators.etag = value
                case "last-modified": validators.lastModified = value
                case "sha256": sha256 = value
                case "signature-sha256": signatureSHA256 = value
                case "confirmed": confirmed = Int64(value).map(Double.init)
                case "noted": noted = Int64(value).map(Double.init)
                default: break
                }
            }
        }

        var text: [UInt8] {
            var text = "url\t\(validators.url)\n"
            // Bytes, not Characters: "\r\n" is one Character, which a search for "\n" would miss.
            if let etag = validators.etag, !etag.utf8.contains(UInt8(ascii: "\n")) { text += "etag\t\(etag)\n" }
            if let date = validators.lastModified, !date.utf8.contains(UInt8(ascii: "\n")) { text += "last-modified\t\(date)\n" }
            if let sha256 { text += "sha256\t\(sha256)\n" }
            if let signatureSHA256 { text += "signature-sha256\t\(signatureSHA256)\n" }
            if let confirmed { text += "confirmed\t\(Int64(confirmed))\n" }
            if let noted { text += "noted\t\(Int64(noted))\n" }
            return Array(text.utf8)
        }
    }
}
