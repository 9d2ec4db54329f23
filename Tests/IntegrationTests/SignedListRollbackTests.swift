import Foundation
import Testing
import MirrorTestSupport

/// A checksum list or Metalink file signed with OpenPGP holds a destination to the newest
/// signature it accepted, as `serial` does for a signed YAML manifest: a mirror serving a list its
/// publisher signed earlier is refused, before any size is asked and with nothing under DEST
/// changed (docs/signing.md, "Checksum lists and Metalink signed with OpenPGP"; The Update
/// Framework's rollback attack). The key and signatures are dated in the past with gpg's
/// `--faked-system-time`, so two signatures are months apart without waiting.
@Suite(.serialized) struct SignedListRollbackTests {
    static let june = "20250601T000000", july = "20250701T000000"

    /// Puts the kept file `name` and its signature (`name` + `signature`) where the server serves
    /// `path`, as a mirror holding that version would.
    static func serve(_ fx: SyncFixture, _ name: String, at path: String, signature: String) throws {
        for (from, to) in [(name, path), (name + signature, path + signature)] {
            try? FileManager.default.removeItem(atPath: to)
            try FileManager.default.copyItem(atPath: fx.dir.path(from), toPath: to)
        }
    }

    @Test func aListSignedBeforeTheOneAcceptedIsRefusedAndTheSameOneAgainIsNot() throws {
        let fx = try SyncFixture()
        let keys = try OpenPGPKeys(createdAt: "20250101T000000")
        let keyring = try keys.exportKeyring()
        let a = try TestData.writeFile(at: fx.www + "/rel/a.iso", size: 40_000, seed: 1)
        let b = try TestData.writeFile(at: fx.www + "/rel/b.iso", size: 30_000, seed: 2)
        let list = fx.www + "/rel/SHA256SUMS"
        // June's list names a.iso; July's adds b.iso. Both kept, as an old mirror would.
        try Data("\(a) *a.iso\n".utf8).write(to: URL(fileURLWithPath: fx.dir.path("june")))
        try keys.detachSign(fx.dir.path("june"), output: fx.dir.path("june.gpg"), at: Self.june)
        try Data("\(a) *a.iso\n\(b) *b.iso\n".utf8).write(to: URL(fileURLWithPath: fx.dir.path("july")))
        try keys.detachSign(fx.dir.path("july"), output: fx.dir.path("july.gpg"), at: Self.july)
        func serve(_ name: String) throws { try Self.serve(fx, name, at: list, signature: ".gpg") }
        let url = fx.server.baseURL + "rel/SHA256SUMS"
        func sync() throws -> ProcessResult { try Mirror.run(["sync", url, "--dest", fx.dest, "--keyring", keyring]) }

        try serve("july")
        let first = try sync()
        #expect(first.exitCode == 0, "\(first)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("b.iso")) == b)
        let status = try Mirror.run(["status", url, "--dest", fx.dest])
        #expect(status.stdout.contains("signed list: signature of 2025-07-01T00:00:00Z accepted (--keyring refuses a list signed earlier)"),
                "the serial accepted is July's signature time: \(status.stdout)")

        try serve("june")
        let before = try fx.server.settledAccessLog().count
        let older = try sync()
        #expect(older.exitCode == 65, "\(older)")
        #expect(older.stderr.contains("refused: signed at 2025-06-01T00:00:00Z, before the list this destination already accepted "
                                      + "(signed at 2025-07-01T00:00:00Z)"), "\(older.stderr)")
        let asked = try fx.server.settledAccessLog().dropFirst(before)
        #expect(!asked.contains { $0.method == "HEAD" || $0.uri.hasSuffix(".iso") }, "no size or file asked: \(asked)")
        #expect(fx.exists(fx.destPath("b.iso")), "nothing under DEST changed")

        // The same July list again (a 200 with the same bytes and signature) is taken.
        try serve("july")
        let again = try sync()
        #expect(again.exitCode == 0, "\(again)")
    }

    @Test func aMetalinkFileKeepsItsSignatureTimeInItsKeptCopy() throws {
        let fx = try SyncFixture()
        let keys = try OpenPGPKeys(createdAt: "20250101T000000")
        let keyring = try keys.exportKeyring()
        let sha = try TestData.writeFile(at: fx.www + "/pool/x.bin", size: 20_000, seed: 3)
        func meta4(_ size: Int) -> String {
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">\n"
                + "<file name=\"x.bin\"><size>\(size)</size><hash type=\"sha-256\">\(sha)</hash>"
                + "<url>\(fx.server.baseURL)pool/x.bin</url></file>\n</metalink>\n"
        }
        let path = fx.www + "/set.meta4"
        try Data(meta4(20_000).utf8).write(to: URL(fileURLWithPath: fx.dir.path("july.meta4")))
        try keys.detachSign(fx.dir.path("july.meta4"), output: fx.dir.path("july.meta4.asc"), armor: true, at: Self.july)
        // Another length too: nginx's ETag is its modification time and length, both the same otherwise.
        try Data((meta4(19_999) + "\n").utf8).write(to: URL(fileURLWithPath: fx.dir.path("june.meta4")))
        try keys.detachSign(fx.dir.path("june.meta4"), output: fx.dir.path("june.meta4.asc"), armor: true, at: Self.june)
        func serve(_ name: String) throws { try Self.serve(fx, name, at: path, signature: ".asc") }
        let url = fx.server.baseURL + "set.meta4"
        func sync() throws -> ProcessResult { try Mirror.run(["sync", url, "--dest", fx.dest, "--keyring", keyring]) }
        try serve("july.meta4")
        #expect(try sync().exitCode == 0)
        // The server gone, the kept copy answers, and its mark carries July's time: admitted.
        fx.server.stop()
        let kept = try sync()
        #expect(kept.exitCode == 0, "\(kept)")
        #expect(kept.stderr.contains("using the last good copy"), "\(kept.stderr)")
        try fx.server.restart()
        try serve("june.meta4")
        let older = try sync()
        #expect(older.exitCode == 65, "\(older)")
        #expect(older.stderr.contains("signed at 2025-06-01T00:00:00Z, before the list this destination already accepted"), "\(older.stderr)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("x.bin")) == sha)
    }
}
