import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// `mirror manifest sign` and `mirror sync --trust`, the built binary against nginx on loopback.
@Suite(.serialized) struct SignedManifestTests {
    /// A served folder of two files, its manifest signed by the binary with a fresh key.
    private func signedFixture() throws -> (fx: SyncFixture, keys: TestKeys, publicKey: String, shas: [String: String]) {
        let fx = try SyncFixture()
        var shas: [String: String] = [:]
        shas["a.bin"] = try fx.addFile("a.bin", size: 10_000, seed: 1)
        shas["dir/b.bin"] = try fx.addFile("dir/b.bin", size: 70_000, seed: 2)
        try fx.writeManifest()
        let keys = try TestKeys()
        let (priv, pub) = try keys.generateEd25519("signer")
        let signed = try Mirror.run(["manifest", "sign", fx.manifestPath, "--key", priv])
        try #require(signed.exitCode == 0, "\(signed)")
        return (fx, keys, pub, shas)
    }

    @Test func theSignatureFileVerifiesWithOpenSSLAndAGoodManifestSyncs() throws {
        let (fx, keys, pub, shas) = try signedFixture()
        let sigText = try String(contentsOfFile: fx.manifestPath + ".sig", encoding: .utf8)
        #expect(sigText.hasSuffix("\n") && sigText.count == 89, "one line of 88 base64 characters: \(sigText)")
        // Independent check of the format: the raw signature verifies with `openssl pkeyutl`.
        let raw = try #require(Data(base64Encoded: sigText.trimmingCharacters(in: .newlines)))
        let rawPath = keys.dir.path("raw.sig")
        try raw.write(to: URL(fileURLWithPath: rawPath))
        let openssl = try TestKeys.openssl(["pkeyutl", "-verify", "-pubin", "-inkey", pub, "-rawin",
                                            "-in", fx.manifestPath, "-sigfile", rawPath])
        #expect(openssl.stdout.contains("Signature Verified Successfully"), "\(openssl)")

        let result = try fx.sync(["--trust", pub])
        #expect(result.exitCode == 0, "\(result)")
        for (path, sha) in shas {
            #expect(try TestData.sha256(ofFileAt: fx.destPath(path)) == sha, "\(path)")
        }
        #expect(try fx.requests(atLeast: 2).count == 2)
    }

    @Test func aTamperedManifestIsRefusedBeforeAnyRequestOrWrite() throws {
        let (fx, keys, pub, _) = try signedFixture()
        defer { withExtendedLifetime(keys) {} }  // the key files live in its folder
        // The attacker swaps a checksum (and could swap the file behind it): one byte changes.
        var text = try String(contentsOfFile: fx.manifestPath, encoding: .utf8)
        let sha = try #require(text.range(of: "sha256: ")).upperBound
        text.replaceSubrange(sha ..< text.index(after: sha), with: text[sha] == "0" ? "1" : "0")
        try text.write(toFile: fx.manifestPath, atomically: false, encoding: .utf8)

        let result = try fx.sync(["--trust", pub])
        #expect(result.exitCode == 65, "\(result)")
        #expect(result.stderr.contains("\(fx.manifestPath): refused: signature \(fx.manifestPath).sig does not match"), "\(result.stderr)")
        #expect(try fx.requestsSoFar().isEmpty, "no request before the signature is checked")
        #expect(!fx.exists(fx.dest), "nothing is created on disk")
    }

    @Test func aMissingOrMalformedSignatureOrAnotherKeyIsRefused() throws {
        let (fx, keys, _, _) = try signedFixture()
        let (_, otherPub) = try keys.generateEd25519("other")
        let wrongKey = try fx.sync(["--trust", otherPub])
        #expect(wrongKey.exitCode == 65, "\(wrongKey)")
        #expect(wrongKey.stderr.contains("does not match"), "\(wrongKey.stderr)")

        let garbled = keys.dir.path("garbled.sig")
        try Data("not a signature\n".utf8).write(to: URL(fileURLWithPath: garbled))
        let malformed = try fx.sync(["--trust", otherPub, "--signature", garbled])
        #expect(malformed.exitCode == 65, "\(malformed)")
        #expect(malformed.stderr.contains("signature \(garbled) is malformed"), "\(malformed.stderr)")

        try FileManager.default.removeItem(atPath: fx.manifestPath + ".sig")
        let missing = try fx.sync(["--trust", otherPub])
        #expect(missing.exitCode == 65, "\(missing)")
        #expect(missing.stderr.contains("\(fx.manifestPath): refused: no signature"), "\(missing.stderr)")
        #expect(try fx.requestsSoFar().isEmpty)
        #expect(!fx.exists(fx.dest))
    }

    @Test func aKeyThatIsNotAnEd25519PublicKeyIsAUsageError() throws {
        let (fx, keys, _, _) = try signedFixture()
        let ec = try keys.generate("ec.pem", ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        let ecPub = try keys.publicKey(of: ec, name: "ec.pub.pem")
        let result = try fx.sync(["--trust", ecPub])
        #expect(result.exitCode == 64, "\(result)")
        #expect(result.stderr.contains("an EC key; signed manifests use Ed25519 keys only"), "\(result.stderr)")
        let sign = try Mirror.run(["manifest", "sign", fx.manifestPath, "--key", ec])
        #expect(sign.exitCode == 64, "\(sign)")
        #expect(try fx.requestsSoFar().isEmpty)
    }
}
