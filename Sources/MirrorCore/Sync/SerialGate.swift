import MirrorFS
import MirrorKit
import MirrorModel
import MirrorState

/// Where ``SerialPolicy`` meets DEST: the serial accepted last read from the state folder, the
/// verdict, and the new serial written (durably, ``AcceptedManifests``) before the run fetches
/// anything for the manifest, so that a run killed right after still refuses an older one.
enum SerialGate {
    /// Throws ``SyncError/manifestRefused(manifest:_:)`` for a manifest DEST must not take.
    /// `state`: DEST's state folder, nil when there is none yet (a dry run before the first run:
    /// only the expiry can refuse). `record`: false for a dry run, which changes nothing.
    static func admit(_ manifest: Manifest, sha256: String, state: FileDescriptor?, record: Bool,
                      now: Int64 = Int64(currentUnixTime())) throws {
        let policy = SerialPolicy(serial: manifest.serial, sha256: manifest.signedListSHA256 ?? sha256, expires: manifest.expires,
                                  now: now, serialIsSignatureTime: manifest.signedListSHA256 != nil)
        do {
            switch policy.judge(after: try state.flatMap { try AcceptedManifests.read(in: $0) }) {
            case .refuse(let refusal):
                throw SyncError.manifestRefused(manifest: manifest.sourceName, refusal)
            case .accept(let newRecord):
                if record, let state, let newRecord {
                    try AcceptedManifests.write(newRecord, in: state)
                    CrashPoint.hit("serial-after-record")
                }
            }
        } catch let error as SystemError {
            throw SyncError.destination(error)
        }
    }
}
