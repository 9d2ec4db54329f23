import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// A signed manifest published as two files (docs/signing.md, "Publishing"): a run that meets the
/// new manifest with the old signature asks for both again once, after a pause, and takes the pair
/// when it matches; a signature that still does not match is refused (exit 65).
@Suite(.serialized) struct SignaturePublishTests {
    /// The manifest (v1 signed) served from the fixture's folder, and the key pair.
    private func published() throws -> (fx: SyncFixture, keys: TestKeys, privateKey: String, publicKey: String, file: String) {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 10_000, seed: 1)
        let file = fx.www + "/manifest.yaml"
        try fx.manifest.write(to: file)
        let keys = try TestKeys()
        let (priv, pub) = try keys.generateEd25519("publisher")
        try sign(file, priv)
        return (fx, keys, priv, pub, file)
    }

    private func sign(_ file: String, _ key: String) throws {
        let signed = try Mirror.run(["manifest", "sign", file, "--key", key], timeout: 60)
        try #require(signed.exitCode == 0, "\(signed)")
    }

    private func sync(_ fx: SyncFixture, _ pub: String) throws -> ChildProcess {
        try Mirror.start(["sync", fx.server.url("manifest.yaml"), "--dest", fx.dest, "--trust", pub])
    }

    private func signatureRequests(_ fx: SyncFixture) throws -> Int {
        try fx.server.accessLog().filter { $0.uri == "/manifest.yaml.sig" }.count
    }

    /// v2 is written, its signature not yet: the run's first look refuses the pair, the
    /// publisher then writes the signature, and the second look (both files again) takes v2.
    @Test func aRunBetweenTheManifestAndItsSignatureTakesThePairOnItsSecondLook() throws {
        let (fx, keys, priv, pub, file) = try published()
        defer { withExtendedLifetime(keys) {} }
        try #require(try sync(fx, pub).wait(timeout: 60).exitCode == 0)
        let before = try signatureRequests(fx)

        let b = try fx.addFile("b.bin", size: 20_000, seed: 2)
        try fx.manifest.write(to: file)  // v2, still beside v1's signature
        let run = try sync(fx, pub)
        try Wait.until("the run asked for the old signature", timeout: 30) { try signatureRequests(fx) > before }
        try sign(file, priv)
        let result = try run.wait(timeout: 60)
        #expect(result.exitCode == 0, "\(result)")
        #expect(result.stderr.contains("a publish was in progress"), "\(result.stderr)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("b.bin")) == b)
        try Wait.until("nginx logged both requests for the signature", timeout: 5) { try signatureRequests(fx) >= before + 2 }
        #expect(try signatureRequests(fx) == before + 2, "the signature is asked twice")
    }

    /// A signature that does not match on the second look either is the answer: exit 65, the
    /// new manifest not used, nothing downloaded.
    @Test func aSignatureThatStillDoesNotMatchIsRefused() throws {
        let (fx, keys, _, pub, file) = try published()
        defer { withExtendedLifetime(keys) {} }
        try #require(try sync(fx, pub).wait(timeout: 60).exitCode == 0)
        let before = try signatureRequests(fx)
        try fx.addFile("b.bin", size: 20_000, seed: 2)
        try fx.manifest.write(to: file)

        let result = try sync(fx, pub).wait(timeout: 60)
        #expect(result.exitCode == 65, "\(result)")
        #expect(result.stderr.contains("does not match the manifest"), "\(result.stderr)")
        #expect(!fx.exists(fx.destPath("b.bin")))
        try Wait.until("nginx logged both requests for the signature", timeout: 5) { try signatureRequests(fx) >= before + 2 }
        #expect(try signatureRequests(fx) == before + 2, "asked again once, not more")
    }
}
