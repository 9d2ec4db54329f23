import Testing
@testable import MirrorCore
import MirrorFS
import MirrorState

/// ``SerialPolicy``: rollback and freeze rules, facts in, a verdict out (docs/signing.md, "Versions").
struct SerialPolicyTests {
    let a = String(repeating: "a", count: 64)
    let b = String(repeating: "b", count: 64)

    func policy(_ serial: Int64?, _ sha: String, expires: Int64? = nil, now: Int64 = 1_000) -> SerialPolicy {
        SerialPolicy(serial: serial, sha256: sha, expires: expires.map { FileTime(seconds: $0) }, now: now)
    }

    @Test func theFirstManifestIsAcceptedAndRecordedOnlyWithASerial() {
        #expect(policy(5, a, expires: 2_000).judge(after: nil) == .accept(record: AcceptedManifest(serial: 5, sha256: a, expires: 2_000)))
        #expect(policy(nil, a).judge(after: nil) == .accept(record: nil))
    }

    @Test func aLowerSerialOtherBytesOrNoSerialAreRefused() {
        let accepted = AcceptedManifest(serial: 5, sha256: a, expires: nil)
        #expect(policy(4, a).judge(after: accepted) == .refuse(.older(serial: 4, accepted: 5)))
        #expect(policy(5, b).judge(after: accepted) == .refuse(.otherBytes(serial: 5)))
        #expect(policy(nil, a).judge(after: accepted) == .refuse(.noSerial(accepted: 5)))
    }

    @Test func theSameManifestAgainWritesNothingAndAHigherOneIsRecorded() {
        let accepted = AcceptedManifest(serial: 5, sha256: a, expires: 2_000)
        #expect(policy(5, a, expires: 2_000).judge(after: accepted) == .accept(record: nil))
        #expect(policy(6, b).judge(after: accepted) == .accept(record: AcceptedManifest(serial: 6, sha256: b, expires: nil)))
    }

    @Test func anExpiryAtOrBeforeNowIsRefusedWhateverTheSerial() {
        #expect(policy(6, a, expires: 1_000, now: 1_000).judge(after: nil) == .refuse(.expired(at: FileTime(seconds: 1_000))))
        #expect(policy(6, a, expires: 1_001, now: 1_000).judge(after: nil) != .refuse(.expired(at: FileTime(seconds: 1_001))))
        // A rollback is named as one even when the old manifest has also expired.
        #expect(policy(4, a, expires: 10).judge(after: AcceptedManifest(serial: 5, sha256: a, expires: nil))
                == .refuse(.older(serial: 4, accepted: 5)))
    }

    @Test func theStateFileReadsBackWhatIsWrittenAndRefusesAnythingElse() {
        let accepted = AcceptedManifest(serial: 7, sha256: a, expires: 1_799_244_636)
        #expect(AcceptedManifests.parse(AcceptedManifests.format(accepted)) == accepted)
        let plain = AcceptedManifest(serial: 0, sha256: b, expires: nil)
        #expect(AcceptedManifests.parse(AcceptedManifests.format(plain)) == plain)
        for bad in ["", "mirror-serial 1\n", "mirror-serial 2\nserial 1\nsha256 \(a)\n", "mirror-serial 1\nserial -1\nsha256 \(a)\n",
                    "mirror-serial 1\nserial 1\nsha256 abc\n", "mirror-serial 1\nserial 1\nserial 2\nsha256 \(a)\n",
                    "mirror-serial 1\nserial 1\nsha256 \(a)\nwhat 1\n", "mirror-serial 1\nserial 1\nsha256 \(a)\nexpires soon\n"] {
            #expect(AcceptedManifests.parse(bad) == nil, "\(bad)")
        }
    }
}
