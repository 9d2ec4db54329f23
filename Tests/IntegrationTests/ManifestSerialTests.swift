import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// `serial` and `expires` under `--trust` (docs/signing.md, "Versions"): the built binary, its
/// own `manifest create` and `manifest sign`, nginx on loopback. A mirror that serves an older
/// signed manifest, other bytes under the same serial, or an expired one is refused with exit 65
/// before any request for files and with nothing under DEST changed.
@Suite(.serialized) struct ManifestSerialTests {
    /// Two publishes of one served folder: v1 (`a.bin`, serial 1) and v2 (`a.bin`, `fix.bin`,
    /// serial 2), each made by `manifest create` and signed by `manifest sign`.
    struct Published {
        let fx: SyncFixture
        let keys: TestKeys
        let privateKey: String
        let publicKey: String
        let v1: String
        let v2: String
    }

    private func published() throws -> Published {
        let fx = try SyncFixture()
        try TestData.writeFile(at: fx.www + "/a.bin", size: 10_000, seed: 1)
        let v1 = fx.dir.path("v1.yaml")
        try create(fx, v1, ["--serial", "1", "--expires", "30d"])
        try TestData.writeFile(at: fx.www + "/fix.bin", size: 20_000, seed: 2)
        let v2 = fx.dir.path("v2.yaml")
        try create(fx, v2, ["--serial", "2", "--expires", "30d"])
        let keys = try TestKeys()
        let (priv, pub) = try keys.generateEd25519("publisher")
        for manifest in [v1, v2] { try sign(manifest, priv) }
        return Published(fx: fx, keys: keys, privateKey: priv, publicKey: pub, v1: v1, v2: v2)
    }

    private func create(_ fx: SyncFixture, _ output: String, _ extra: [String]) throws {
        let made = try Mirror.run(["manifest", "create", fx.www, "--base-url", fx.server.baseURL, "-o", output, "--quiet"] + extra)
        try #require(made.exitCode == 0, "\(made)")
    }

    private func sign(_ manifest: String, _ key: String) throws {
        let signed = try Mirror.run(["manifest", "sign", manifest, "--key", key])
        try #require(signed.exitCode == 0, "\(signed)")
    }

    private func sync(_ p: Published, _ manifest: String, _ extra: [String] = []) throws -> ProcessResult {
        try Mirror.run(["sync", manifest, "--dest", p.fx.dest, "--trust", p.publicKey] + extra)
    }

    private func read(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    @Test func anOlderSignedManifestIsRefusedAndDeletesNothing() throws {
        let p = try published()
        let v2 = try sync(p, p.v2, ["--delete"])
        try #require(v2.exitCode == 0, "\(v2)")
        let serial = try read(p.fx.destPath(".mirror/serial"))
        let before = try p.fx.requestsSoFar().count

        // v1 carries its own valid signature: without serials it was accepted, and --delete
        // (within the default --max-delete) removed fix.bin on every machine.
        for extra in [["--delete"], ["--delete", "--dry-run"]] {
            let rolledBack = try sync(p, p.v1, extra)
            #expect(rolledBack.exitCode == 65, "\(extra): \(rolledBack)")
            #expect(rolledBack.stderr.contains("\(p.v1): refused: serial 1 is older than serial 2, which this destination already accepted"),
                    "\(rolledBack.stderr)")
        }
        #expect(p.fx.exists(p.fx.destPath("fix.bin")), "nothing deleted")
        #expect(try read(p.fx.destPath(".mirror/serial")) == serial, "the serial accepted is unchanged")
        #expect(try p.fx.requestsSoFar().count == before, "no request for files")
    }

    @Test func anAtomicDestinationRefusesAnOlderManifestAndKeepsItsGenerations() throws {
        let p = try published()
        let v2 = try sync(p, p.v2, ["--atomic"])
        try #require(v2.exitCode == 0, "\(v2)")
        let generations = try FileManager.default.contentsOfDirectory(atPath: p.fx.dest + ".generations").sorted()
        let shown = try FileManager.default.destinationOfSymbolicLink(atPath: p.fx.dest)

        let rolledBack = try sync(p, p.v1, ["--atomic"])
        #expect(rolledBack.exitCode == 65, "\(rolledBack)")
        #expect(rolledBack.stderr.contains("serial 1 is older than serial 2"), "\(rolledBack.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: p.fx.dest + ".generations").sorted() == generations)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: p.fx.dest) == shown)
        #expect(p.fx.exists(p.fx.destPath("fix.bin")))
    }

    @Test func aFetchedOlderManifestDoesNotReplaceTheLastGoodCopy() throws {
        let p = try published()
        let served = p.fx.www + "/lab.yaml"
        func serve(_ manifest: String) throws {
            for suffix in ["", ".sig"] {
                try? FileManager.default.removeItem(atPath: served + suffix)
                try FileManager.default.copyItem(atPath: manifest + suffix, toPath: served + suffix)
            }
        }
        let url = p.fx.server.baseURL + "lab.yaml"
        try serve(p.v2)
        let v2 = try sync(p, url)
        try #require(v2.exitCode == 0, "\(v2)")
        let kept = p.fx.destPath(".mirror/manifest/last.yaml")
        #expect(try read(kept) == read(p.v2))

        try serve(p.v1)
        let rolledBack = try sync(p, url, ["--delete"])
        #expect(rolledBack.exitCode == 65, "\(rolledBack)")
        #expect(rolledBack.stderr.contains("serial 1 is older than serial 2"), "\(rolledBack.stderr)")
        #expect(try read(kept) == read(p.v2), "the older manifest is not kept as the last good copy")
        #expect(p.fx.exists(p.fx.destPath("fix.bin")))

        // The mirror then goes down: the run falls back on the copy, which is the accepted one
        // (had v1 replaced it, every later run on the copy would be refused too).
        p.fx.server.stop()
        let fallBack = try sync(p, url)
        #expect(fallBack.exitCode == 0, "\(fallBack)")
        #expect(fallBack.stderr.contains("using the last good copy"), "\(fallBack.stderr)")
    }

    @Test func theSameSerialWithOtherBytesOrNoSerialIsRefused() throws {
        let p = try published()
        try #require(try sync(p, p.v2).exitCode == 0)

        // Other bytes under serial 2 (a comment is enough), signed by the publisher's own key.
        let other = p.fx.dir.path("other.yaml")
        try (String(contentsOfFile: p.v2, encoding: .utf8) + "# republished without raising the serial\n")
            .write(toFile: other, atomically: true, encoding: .utf8)
        try sign(other, p.privateKey)
        let same = try sync(p, other)
        #expect(same.exitCode == 65, "\(same)")
        #expect(same.stderr.contains("serial 2 was accepted with other bytes"), "\(same.stderr)")

        let unversioned = p.fx.dir.path("unversioned.yaml")
        try create(p.fx, unversioned, [])
        try sign(unversioned, p.privateKey)
        let none = try sync(p, unversioned)
        #expect(none.exitCode == 65, "\(none)")
        #expect(none.stderr.contains("no serial, where this destination already accepted serial 2"), "\(none.stderr)")

        // The accepted bytes again are fine, and so is a higher serial.
        #expect(try sync(p, p.v2).exitCode == 0)
        let v3 = p.fx.dir.path("v3.yaml")
        try create(p.fx, v3, ["--serial", "3"])
        try sign(v3, p.privateKey)
        #expect(try sync(p, v3).exitCode == 0)
        #expect(try String(contentsOfFile: p.fx.destPath(".mirror/serial"), encoding: .utf8).contains("serial 3\n"))
    }

    @Test func anExpiredManifestIsRefusedNamingTheTime() throws {
        let p = try published()
        let expired = p.fx.dir.path("expired.yaml")
        let text = try String(contentsOfFile: p.v2, encoding: .utf8)
            .replacingOccurrences(of: #"expires: "[^"]*""#, with: #"expires: "2026-01-01T00:00:00Z""#, options: .regularExpression)
        try text.write(toFile: expired, atomically: true, encoding: .utf8)
        // manifest sign refuses a past expires; a mirror replaying an old pair has its signature.
        let refusedSign = try Mirror.run(["manifest", "sign", expired, "--key", p.privateKey])
        #expect(refusedSign.exitCode == 65, "\(refusedSign)")
        #expect(refusedSign.stderr.contains("expires 2026-01-01T00:00:00Z is past"), "\(refusedSign.stderr)")
        let raw = p.keys.dir.path("expired.raw")
        try TestKeys.openssl(["pkeyutl", "-sign", "-rawin", "-inkey", p.privateKey, "-in", expired, "-out", raw])
        try (read(raw).base64EncodedString() + "\n").write(toFile: expired + ".sig", atomically: true, encoding: .utf8)

        let result = try sync(p, expired)
        #expect(result.exitCode == 65, "\(result)")
        #expect(result.stderr.contains("\(expired): refused: expired at 2026-01-01T00:00:00Z"), "\(result.stderr)")
        #expect(!p.fx.exists(p.fx.destPath("a.bin")), "nothing fetched")
        #expect(try p.fx.requestsSoFar().isEmpty)
        // Without --trust, serial and expires are read but hold nothing: nobody vouches for them.
        #expect(try Mirror.run(["sync", expired, "--dest", p.fx.dest]).exitCode == 0)
    }

    @Test func theSerialIsRecordedBeforeAnyFileIsFetched() throws {
        let p = try published()
        let crashed = try Mirror.run(["sync", p.v2, "--dest", p.fx.dest, "--trust", p.publicKey],
                                     environment: ["MIRROR_CRASH_AT": "serial-after-record"], timeout: 60)
        #expect(crashed.signal == SIGKILL, "the crash point was reached: \(crashed)")
        #expect(!p.fx.exists(p.fx.destPath("fix.bin")))
        let rolledBack = try sync(p, p.v1)
        #expect(rolledBack.exitCode == 65, "a run killed after accepting serial 2 still refuses serial 1: \(rolledBack)")
    }

    @Test func aKeyRotationAcceptsEitherKeyWhileBothAreTrusted() throws {
        let p = try published()
        let (newPrivate, newPublic) = try p.keys.generateEd25519("next")
        try sign(p.v2, newPrivate)
        let both = try Mirror.run(["sync", p.v2, "--dest", p.fx.dest, "--trust", p.publicKey, "--trust", newPublic])
        #expect(both.exitCode == 0, "\(both)")
        let folder = try Mirror.run(["sync", p.v2, "--dest", p.fx.dest, "--trust", p.keys.dir.path]) // *.pub.pem and *.pem
        #expect(folder.exitCode == 64, "a folder holding a private key is a usage error, never a silent skip: \(folder)")
        let keyFolder = p.fx.dir.path("trusted")
        try FileManager.default.createDirectory(atPath: keyFolder, withIntermediateDirectories: false)
        for key in [p.publicKey, newPublic] {
            try FileManager.default.copyItem(atPath: key, toPath: keyFolder + "/" + URL(fileURLWithPath: key).lastPathComponent)
        }
        #expect(try Mirror.run(["sync", p.v2, "--dest", p.fx.dest, "--trust", keyFolder]).exitCode == 0)
        let oldOnly = try sync(p, p.v2)
        #expect(oldOnly.exitCode == 65, "\(oldOnly)")
        #expect(oldOnly.stderr.contains("does not match the manifest and the trusted key \(p.publicKey)"), "\(oldOnly.stderr)")
    }

    @Test func statusAndTheMetricsFileShowTheSerialAndTheExpiry() throws {
        let p = try published()
        let metrics = p.fx.dir.path("mirror.prom")
        let v2 = try sync(p, p.v2, ["--metrics-file", metrics])
        try #require(v2.exitCode == 0, "\(v2)")
        let expires = try #require(try String(contentsOfFile: p.v2, encoding: .utf8)
            .split(separator: "\n").first { $0.hasPrefix("expires: ") }).dropFirst("expires: ".count).trimmingCharacters(in: ["\""])
        let prom = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(prom.contains("\nmirror_manifest_serial{"), "\(prom)")
        #expect(prom.split(separator: "\n").contains { $0.hasPrefix("mirror_manifest_serial{") && $0.hasSuffix("} 2") }, "\(prom)")
        #expect(prom.contains("\nmirror_manifest_expiry_timestamp_seconds{"), "\(prom)")

        let text = try Mirror.run(["status", p.v2, "--dest", p.fx.dest])
        #expect(text.exitCode == 0, "\(text)")
        #expect(text.stdout.contains("signed manifest: serial 2 accepted (--trust refuses a lower one); expires \(expires) (in "),
                "\(text.stdout)")
        let json = try Mirror.run(["status", p.v2, "--dest", p.fx.dest, "--json"])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let signed = try #require(document["signed_manifest"] as? [String: Any], "\(json.stdout)")
        #expect(signed["serial"] as? Int == 2)
        #expect(signed["expires"] as? String == expires)
    }
}
