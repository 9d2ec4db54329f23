import Testing
@testable import MirrorCore
@testable import MirrorModel
import MirrorFS
import MirrorState

/// A checksum list's or Metalink file's OpenPGP signature time as the destination's serial: read
/// from gpgv's `VALIDSIG`, written into the kept copy's mark and read back, and judged with the
/// words of a signature, not of a serial (docs/signing.md).
struct SignedListTimeTests {
    let a = String(repeating: "a", count: 64)
    let b = String(repeating: "b", count: 64)

    @Test func gpgvGivesTheTimeInSecondsOrISO8601() {
        #expect(OpenPGPCheck.signatureTime("1751328000") == 1_751_328_000)
        #expect(OpenPGPCheck.signatureTime("20250701T000000") == 1_751_328_000)
        #expect(OpenPGPCheck.signatureTime("20250701T000000Z") == nil)
        #expect(OpenPGPCheck.signatureTime("2025-07-01") == nil)
        #expect(OpenPGPCheck.signatureTime("-5") == nil)
    }

    @Test func theMarkCarriesTheTimeAndTheSignedBytesDigest() throws {
        let signed = KeptPublishedCopy.Signed(signedAt: 1_751_328_000, sha256: a)
        let meta4 = Array("<?xml version=\"1.0\"?>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"/>\n".utf8)
        let marked = KeptPublishedCopy.markVerified(metalink: meta4, signed)
        #expect(KeptPublishedCopy.isMarkedVerified(marked))
        #expect(KeptPublishedCopy.signed(in: marked) == signed)
        var manifest = Manifest(sourceName: "x", entries: [])
        KeptPublishedCopy.applyMark(of: marked, to: &manifest)
        #expect(manifest.serial == 1_751_328_000 && manifest.signedListSHA256 == a)
        // A mark from before it carried them, or a damaged one, says nothing.
        #expect(KeptPublishedCopy.signed(in: Array("# x (mirror: OpenPGP signature verified)\n".utf8)) == nil)
        #expect(KeptPublishedCopy.signed(in: Array((KeptPublishedCopy.note(signed).dropLast(3) + "\n").utf8)) == nil)
    }

    @Test func anOlderSignatureIsARollbackInTimesNotNumbers() {
        func policy(_ serial: Int64, _ sha: String) -> SerialPolicy {
            SerialPolicy(serial: serial, sha256: sha, expires: nil, now: 1_800_000_000, serialIsSignatureTime: true)
        }
        let accepted = AcceptedManifest(serial: 1_751_328_000, sha256: a, expires: nil)
        #expect(policy(1_748_736_000, a).judge(after: accepted) == .refuse(.olderSignature(signedAt: 1_748_736_000, accepted: 1_751_328_000)))
        #expect(policy(1_751_328_000, b).judge(after: accepted) == .refuse(.otherSignedBytes(signedAt: 1_751_328_000)))
        #expect(policy(1_751_328_000, a).judge(after: accepted) == .accept(record: nil))
        let text = SerialPolicy.describe(.olderSignature(signedAt: 1_748_736_000, accepted: 1_751_328_000), manifest: "SUMS")
        #expect(text == "SUMS: refused: signed at 2025-06-01T00:00:00Z, before the list this destination already accepted "
                + "(signed at 2025-07-01T00:00:00Z): a mirror or cache serving an older list (nothing was changed)")
    }
}
