import MirrorFS
import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// The newest signed manifest a DEST accepted with `--trust`: its `serial`, the SHA-256 of its
/// bytes and its `expires` (docs/signing.md, "Versions"). What a later run compares a manifest
/// with, so that a mirror cannot roll DEST back to an older signed manifest (The Update
/// Framework's rollback attack) nor serve other bytes under the same serial.
public struct AcceptedManifest: Equatable, Sendable {
    public var serial: Int64
    /// Lowercase hex of the manifest file's bytes as verified (the compressed bytes of a `.gz`).
    public var sha256: String
    /// The manifest's `expires`, Unix seconds, when it has one.
    public var expires: Int64?

    public init(serial: Int64, sha256: String, expires: Int64?) {
        self.serial = serial
        self.sha256 = sha256
        self.expires = expires
    }
}

/// `.mirror/serial` (an atomic DEST: in its store's state folder): ``AcceptedManifest`` as three
/// lines, `serial N`, `sha256 HEX`, and `expires SECONDS` when there is one, after a header.
/// Replaced whole (``StateFile``: a temporary file, `fsync`, `renameat`, `fsync` of the folder),
/// so a crash or a power cut leaves the old serial or the new one, never none: a serial once
/// accepted is never forgotten by a crash. Not the journal: compaction would have to carry it, and
/// an older version would cut the journal at a record kind it does not know (docs/journal.md).
/// A file that does not parse is an error the admin must look at (exit 73), never "no serial":
/// that would accept any older manifest.
public enum AcceptedManifests {
    static let fileName = "serial"
    static let header = "mirror-serial 1"
    static let maximumSize = 4096

    public static func read(in state: FileDescriptor) throws -> AcceptedManifest? {
        guard let text = try StateFile.read(fileName, in: state, trust: true, maximumSize: maximumSize) else { return nil }
        guard let accepted = parse(text) else {
            throw SystemError("read", state.displayPath + "/" + fileName
                              + " (not the serial mirror wrote; restore it from a backup, or remove it to accept any signed manifest once)",
                              code: EINVAL)
        }
        return accepted
    }

    /// Replaces the file with `accepted`, durably, before the run fetches anything for it.
    public static func write(_ accepted: AcceptedManifest, in state: FileDescriptor) throws {
        try StateFile.write(format(accepted), to: fileName, in: state)
    }

    public static func format(_ accepted: AcceptedManifest) -> String {
        var text = header + "\nserial \(accepted.serial)\nsha256 \(accepted.sha256)\n"
        if let expires = accepted.expires { text += "expires \(expires)\n" }
        return text
    }

    public static func parse(_ text: String) -> AcceptedManifest? {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: true)[...]
        guard lines.popFirst() == Substring(header) else { return nil }
        var values: [Substring: Substring] = [:]
        for line in lines {
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, values[parts[0]] == nil else { return nil }
            values[parts[0]] = parts[1]
        }
        guard let serial = values["serial"].flatMap({ Int64($0) }), serial >= 0,
              let sha256 = values["sha256"].map(String.init), HoldFile.isDigest(sha256) else { return nil }
        var expires: Int64?
        if let text = values["expires"] {
            guard let seconds = Int64(text) else { return nil }
            expires = seconds
        }
        guard values.count == (expires == nil ? 2 : 3) else { return nil }
        return AcceptedManifest(serial: serial, sha256: String(sha256), expires: expires)
    }
}
