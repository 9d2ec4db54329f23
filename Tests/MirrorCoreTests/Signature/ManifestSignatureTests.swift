import Foundation
@testable import MirrorModel
import Testing
@testable import MirrorCore
import MirrorTestSupport

/// Loads a fresh Ed25519 pair made by `openssl` (``TestKeys``).
extension TestKeys {
    func ed25519Pair(_ name: String) throws -> (signing: SigningKey, trusted: TrustedKey) {
        let (priv, pub) = try generateEd25519(name)
        return (try SigningKey.load(path: priv), try TrustedKey.load(path: pub))
    }
}

private let manifest = Array("""
    version: 1
    base_url: https://x.example/
    files:
      - {path: a, size: 1, sha256: ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb}

    """.utf8)

private func cause(_ body: () throws -> Void) -> SignatureError.Cause? {
    do {
        try body()
        return nil
    } catch let error as SignatureError {
        return error.cause
    } catch {
        return .malformed(detail: "unexpected error \(error)")
    }
}

@Suite struct ManifestSignatureTests {
    @Test func aGoodSignatureVerifiesAndIsOneBase64Line() throws {
        let keys = try TestKeys()
        let (signing, trusted) = try keys.ed25519Pair("k")
        let file = try ManifestSignature.sign(manifest: manifest, key: signing)
        #expect(file.count == 89, "88 base64 characters and a newline")
        #expect(file.last == 0x0A)
        try ManifestSignature.verify(manifest: manifest, signature: file, trustedKey: trusted)
        // Surrounding whitespace (CRLF after a copy through another system) is tolerated.
        try ManifestSignature.verify(manifest: manifest, signature: [0x20] + file.dropLast() + [0x0D, 0x0A], trustedKey: trusted)
    }

    @Test func aFlippedByteInTheManifestIsAMismatch() throws {
        let (signing, trusted) = try TestKeys().ed25519Pair("k")
        let file = try ManifestSignature.sign(manifest: manifest, key: signing)
        for index in [0, manifest.count / 2, manifest.count - 1] {
            var tampered = manifest
            tampered[index] ^= 0x01
            #expect(cause { try ManifestSignature.verify(manifest: tampered, signature: file, trustedKey: trusted) } == .mismatch,
                    "byte \(index)")
        }
        #expect(cause { try ManifestSignature.verify(manifest: manifest + [0x0A], signature: file, trustedKey: trusted) } == .mismatch)
    }

    @Test func aFlippedByteInTheSignatureIsAMismatch() throws {
        let (signing, trusted) = try TestKeys().ed25519Pair("k")
        let raw = try signing.sign(manifest)
        for index in [0, 31, 32, 63] {
            var bad = raw
            bad[index] ^= 0x80
            let file = Array(Base64.encode(bad).utf8) + [0x0A]
            #expect(cause { try ManifestSignature.verify(manifest: manifest, signature: file, trustedKey: trusted) } == .mismatch,
                    "byte \(index)")
        }
    }

    @Test func anotherKeysSignatureIsAMismatch() throws {
        let keys = try TestKeys()
        let (signing, _) = try keys.ed25519Pair("a")
        let (_, otherTrusted) = try keys.ed25519Pair("b")
        let file = try ManifestSignature.sign(manifest: manifest, key: signing)
        let error = #expect(throws: SignatureError.self) {
            try ManifestSignature.verify(manifest: manifest, signature: file, trustedKey: otherTrusted,
                                         manifestName: "m.yaml", signatureName: "m.yaml.sig")
        }
        #expect(error?.cause == .mismatch)
        #expect(error?.description.hasPrefix("m.yaml: refused: signature m.yaml.sig does not match") == true, "\(String(describing: error))")
    }

    @Test func truncatedOrGarbledSignaturesAreMalformed() throws {
        let (signing, trusted) = try TestKeys().ed25519Pair("k")
        let file = try ManifestSignature.sign(manifest: manifest, key: signing)
        let text = Array(file.dropLast())
        let cases: [(String, [UInt8])] = [
            ("empty", []),
            ("only a newline", [0x0A]),
            ("truncated by 4 characters", Array(text.dropLast(4)) + [0x0A]),
            ("truncated by 1 character", Array(text.dropLast(1))),
            ("raw bytes instead of base64", try signing.sign(manifest)),
            ("two signatures", text + [0x0A] + text),
            ("a stray character", Array(text.prefix(10)) + [0x2E] + Array(text.dropFirst(11))),
            ("a 48-byte signature", Array(Base64.encode([UInt8](repeating: 7, count: 48)).utf8)),
            ("too large", [UInt8](repeating: 0x41, count: ManifestSignature.maxFileSize + 4)),
        ]
        for (what, bytes) in cases {
            let found = cause { try ManifestSignature.verify(manifest: manifest, signature: bytes, trustedKey: trusted) }
            guard case .malformed? = found else {
                Issue.record("\(what): expected malformed, got \(String(describing: found))")
                continue
            }
        }
    }

    @Test func keysThatAreNotEd25519AreRefusedWithTheirType() throws {
        let keys = try TestKeys()
        let rsa = try keys.generate("rsa.pem", ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"])
        let ec = try keys.generate("ec.pem", ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        let ed448 = try keys.generate("ed448.pem", ["-algorithm", "ed448"])
        for (path, type) in [(rsa, "RSA"), (ec, "EC"), (ed448, "ED448")] {
            let signing = #expect(throws: SignatureKeyError.self) { try SigningKey.load(path: path) }
            #expect(signing?.message.contains("an \(type) key; signed manifests use Ed25519 keys only") == true, "\(String(describing: signing))")
            let pub = try keys.publicKey(of: path, name: "\(type).pub.pem")
            let trusted = #expect(throws: SignatureKeyError.self) { try TrustedKey.load(path: pub) }
            #expect(trusted?.message.contains("an \(type) key") == true, "\(String(describing: trusted))")
        }
    }

    @Test func unusableKeyFilesSayWhatIsWrong() throws {
        let keys = try TestKeys()
        let priv = try keys.generate("k.pem", ["-algorithm", "ed25519"])
        let pub = try keys.publicKey(of: priv, name: "k.pub.pem")
        let garbage = keys.dir.path("garbage.pem")
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: garbage))

        func message(_ body: () throws -> Void) -> String {
            do { try body(); return "no error" } catch { return "\(error)" }
        }
        #expect(message { _ = try TrustedKey.load(path: priv) }.contains("this is a private key; --trust takes the public key"))
        #expect(message { _ = try SigningKey.load(path: pub) }.contains("this is a public key"))
        #expect(message { _ = try TrustedKey.load(path: garbage) }.contains("not a PEM public key"))
        #expect(message { _ = try SigningKey.load(path: garbage) }.contains("not a PEM private key"))
        #expect(message { _ = try TrustedKey.load(path: keys.dir.path("absent.pem")) }.contains("cannot read key: No such file or directory"))
    }

    @Test func anEncryptedKeyIsRefusedWithoutPromptingForAPassphrase() throws {
        let keys = try TestKeys()
        let path = keys.dir.path("enc.pem")
        let result = try ChildProcess.run("/usr/bin/env", ["openssl", "genpkey", "-algorithm", "ed25519", "-aes-128-cbc",
                                                           "-pass", "pass:secret", "-out", path], timeout: 60)
        try #require(result.exitCode == 0, "\(result)")
        let error = #expect(throws: SignatureKeyError.self) { try SigningKey.load(path: path) }
        #expect(error?.message.contains("encrypted") == true, "\(String(describing: error))")
    }

    @Test func base64RoundTripsAndRejectsNonCanonicalShapes() {
        for length in 0..<10 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 37 + 200) }
            let text = Base64.encode(bytes)
            if length > 0 { #expect(Base64.decode(Array(text.utf8)) == bytes, "\(length) bytes: \(text)") }
        }
        #expect(Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64.encode(Array("fo".utf8)) == "Zm8=")
        for bad in ["Zm8", "Z===", "====", "Zm=8", "Zm8=Zm8=", "Zm 8", ""] {
            #expect(Base64.decode(Array(bad.utf8)) == nil, "\(bad)")
        }
    }

    @Test func loadWithTrustReadsTheDefaultSigFileAndNamesItWhenMissing() throws {
        let keys = try TestKeys()
        let (signing, trusted) = try keys.ed25519Pair("k")
        let path = keys.dir.path("m.yaml")
        try Data(manifest).write(to: URL(fileURLWithPath: path))
        let trust = ManifestTrust(key: trusted)

        let missing = #expect(throws: SignatureError.self) { try ManifestLoader.load(path: path, trust: trust) }
        #expect(missing?.signature == path + ".sig")
        guard case .missing? = missing?.cause else { Issue.record("\(String(describing: missing))"); return }

        let written = try ManifestSignature.signFile(manifestPath: path, key: signing)
        #expect(written == path + ".sig")
        let loaded = try ManifestLoader.load(path: path, trust: trust)
        #expect(loaded.entries.map(\.path) == ["a"])

        // An invalid manifest is not signed, and no signature file is left behind.
        let invalid = keys.dir.path("bad.yaml")
        try Data("version: 2\n".utf8).write(to: URL(fileURLWithPath: invalid))
        #expect(throws: ManifestError.self) { try ManifestSignature.signFile(manifestPath: invalid, key: signing) }
        #expect(!FileManager.default.fileExists(atPath: invalid + ".sig"))
    }
}
