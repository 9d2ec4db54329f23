import MirrorFS
import MirrorModel
import MirrorState

/// Whether a DEST takes a signed manifest, given the newest one it accepted before: The Update
/// Framework's checks against rollback and freeze (its specification, "Detailed client workflow",
/// the timestamp role: a version never below the trusted one, an expiry never past), for mirror's
/// one document (docs/signing.md, "Versions"). A pure value: facts in, a verdict out; the run
/// reads and writes ``AcceptedManifests`` around it.
///
/// Only with `--trust`: without a signature, whoever serves the manifest can write any serial,
/// so a serial would prove nothing.
public struct SerialPolicy: Sendable {
    /// The manifest at hand.
    public var serial: Int64?
    public var sha256: String
    public var expires: FileTime?
    /// Unix seconds now.
    public var now: Int64
    /// The serial is the time an OpenPGP signature was made (a checksum list or Metalink file with
    /// `--keyring`), and `sha256` that of the bytes it covers: the refusals say so.
    public var serialIsSignatureTime: Bool

    public init(serial: Int64?, sha256: String, expires: FileTime?, now: Int64, serialIsSignatureTime: Bool = false) {
        self.serialIsSignatureTime = serialIsSignatureTime
        self.serial = serial
        self.sha256 = sha256
        self.expires = expires
        self.now = now
    }

    public enum Refusal: Equatable, Sendable {
        /// A serial below the highest DEST accepted: an older manifest (rollback).
        case older(serial: Int64, accepted: Int64)
        /// The accepted serial with other bytes: two manifests may not share a serial.
        case otherBytes(serial: Int64)
        /// No serial, where DEST accepted one: a manifest from before serials, or one stripped of it.
        case noSerial(accepted: Int64)
        /// Past its `expires` (freeze).
        case expired(at: FileTime)
        /// An OpenPGP signature made before the one DEST accepted: an older list (rollback).
        case olderSignature(signedAt: Int64, accepted: Int64)
        /// Another list signed in the same second as the one DEST accepted.
        case otherSignedBytes(signedAt: Int64)
    }

    public enum Verdict: Equatable, Sendable {
        /// Take it; `record` is what to write to `.mirror/serial` before anything is fetched (nil:
        /// the file already says it, or the manifest has no serial).
        case accept(record: AcceptedManifest?)
        case refuse(Refusal)
    }

    public func judge(after accepted: AcceptedManifest?) -> Verdict {
        if let accepted {
            guard let serial else { return .refuse(.noSerial(accepted: accepted.serial)) }
            if serial < accepted.serial {
                return .refuse(serialIsSignatureTime ? .olderSignature(signedAt: serial, accepted: accepted.serial)
                                                     : .older(serial: serial, accepted: accepted.serial))
            }
            if serial == accepted.serial && sha256 != accepted.sha256 {
                return .refuse(serialIsSignatureTime ? .otherSignedBytes(signedAt: serial) : .otherBytes(serial: serial))
            }
        }
        if let expires, expires.seconds <= now { return .refuse(.expired(at: expires)) }
        guard let serial else { return .accept(record: nil) }
        let record = AcceptedManifest(serial: serial, sha256: sha256, expires: expires?.seconds)
        return .accept(record: record == accepted ? nil : record)
    }

    /// The refusal for people: what happened, and what to do.
    public static func describe(_ refusal: Refusal, manifest: String) -> String {
        func time(_ seconds: Int64) -> String { RFC3339.format(FileTime(seconds: seconds, nanoseconds: 0)) ?? "\(seconds)" }
        switch refusal {
        case .older(let serial, let accepted):
            return "\(manifest): refused: serial \(serial) is older than serial \(accepted), which this destination already accepted "
                + "(a mirror or cache serving an old manifest; nothing was changed)"
        case .otherBytes(let serial):
            return "\(manifest): refused: serial \(serial) was accepted with other bytes; the publisher must raise the serial "
                + "with every change (nothing was changed)"
        case .noSerial(let accepted):
            return "\(manifest): refused: no serial, where this destination already accepted serial \(accepted) "
                + "(an old manifest, or one written without --serial; nothing was changed)"
        case .olderSignature(let signedAt, let accepted):
            return "\(manifest): refused: signed at \(time(signedAt)), before the list this destination already accepted "
                + "(signed at \(time(accepted))): a mirror or cache serving an older list (nothing was changed)"
        case .otherSignedBytes(let signedAt):
            return "\(manifest): refused: signed at \(time(signedAt)), the second of the list this destination accepted, "
                + "with other contents (nothing was changed)"
        case .expired(let at):
            return "\(manifest): refused: expired at \(RFC3339.format(at) ?? "\(at.seconds)"); the publisher must sign a new one "
                + "(a mirror or cache serving a stale manifest, or a publisher that stopped; nothing was changed)"
        }
    }
}
