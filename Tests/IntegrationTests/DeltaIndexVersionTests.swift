import Foundation
import MirrorModel
import Testing
import MirrorCore
import MirrorTestSupport

/// Chunk index versions and the requests around a delta, against nginx (docs/manifest.md, "Chunk
/// indexes"): publishers and clients upgrade at different times, so a client still reads the
/// version-1 text index; a publisher writes version 2 unless told otherwise; and a sync without
/// `--trust` asks the origin for nothing but the manifest, the index and the ranges.
@Suite(.serialized) struct DeltaIndexVersionTests {
    /// v1: 16 MiB of seeded bytes in `www/img.bin`; v2: v1 with a 64 KiB edit at 5 MiB + 777.
    /// Returns v2's SHA-256 once written.
    static func edit(_ path: String, seed: UInt64) throws -> String {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let at = (5 << 20) + 777
        bytes.replaceSubrange(at ..< at + (64 << 10), with: TestData.bytes(count: 64 << 10, seed: seed))
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return TestData.sha256(of: bytes)
    }

    static func publish(_ fx: SyncFixture, to manifest: String, _ extra: [String] = []) throws {
        let run = try Mirror.run(["manifest", "create", fx.www, "--base-url", fx.server.baseURL, "--chunks", "--chunks-above", "1M",
                                  "-o", manifest] + extra, timeout: 120)
        #expect(run.exitCode == 0, "\(run)")
    }

    static func indexHead(_ fx: SyncFixture) throws -> String {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: fx.www + "/.mirror-chunks/img.bin"))
        return String(decoding: bytes.prefix(16), as: UTF8.self)
    }

    /// A publisher that still writes version 1 (`--chunks-format 1`, the text index of earlier
    /// publishers): the client reads it and syncs the edit as a delta.
    @Test func aVersionOneIndexStillGivesADelta() throws {
        let fx = try SyncFixture()
        try TestData.writeFile(at: fx.www + "/img.bin", size: 16 << 20, seed: 101)
        try Self.publish(fx, to: fx.manifestPath, ["--chunks-format", "1"])
        #expect(try Self.indexHead(fx) == "mirror-chunks 1\n")
        #expect(try fx.sync().exitCode == 0)
        let sha = try Self.edit(fx.www + "/img.bin", seed: 102)
        try Self.publish(fx, to: fx.manifestPath, ["--chunks-format", "1"])
        let before = try fx.requestsSoFar().count
        let run = try fx.sync(["--json"])
        #expect(run.exitCode == 0, "\(run)")
        #expect(run.stdout.contains("\"delta_from\""), "\(run.stdout)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("img.bin")) == sha)
        let sent = DeltaTests.bytesSent(Array(try fx.requests(atLeast: before + 2).dropFirst(before)))
        #expect(sent < 1 << 20, "the server sent \(sent) bytes for one 64 KiB edit of 16 MiB")
    }

    /// What a publisher writes by default is version 2, and a 64 KiB edit costs less than with
    /// version 1's chunking and index: the edit and about two 16 KiB chunks, not 64 KiB ones.
    @Test func aVersionTwoIndexCostsLessThanVersionOne() throws {
        var sent: [String: Int64] = [:]
        for format in ["1", "2"] {
            let fx = try SyncFixture()
            try TestData.writeFile(at: fx.www + "/img.bin", size: 16 << 20, seed: 111)
            try Self.publish(fx, to: fx.manifestPath, format == "1" ? ["--chunks-format", "1"] : [])
            #expect(try fx.sync().exitCode == 0)
            let sha = try Self.edit(fx.www + "/img.bin", seed: 112)
            try Self.publish(fx, to: fx.manifestPath, format == "1" ? ["--chunks-format", "1"] : [])
            #expect(try Self.indexHead(fx) == "mirror-chunks \(format)\n")
            let before = try fx.requestsSoFar().count
            let run = try fx.sync(["--json"])
            #expect(run.exitCode == 0, "\(run)")
            #expect(run.stdout.contains("\"delta_from\""), "version \(format): \(run.stdout)")
            #expect(try TestData.sha256(ofFileAt: fx.destPath("img.bin")) == sha)
            sent[format] = DeltaTests.bytesSent(Array(try fx.requests(atLeast: before + 2).dropFirst(before)))
        }
        let one = sent["1"] ?? 0, two = sent["2"] ?? 0
        #expect(two < one, "version 2 cost \(two) bytes, version 1 \(one)")
        #expect(two <= (64 << 10) + (100 << 10), "version 2 cost \(two) bytes for a 64 KiB edit")
    }

    /// A sync of a manifest by URL without `--trust` asks for no `MANIFEST.sig`: the origin's
    /// log holds the manifest, the index and the ranges, and no 404. With `--trust` the signature
    /// is asked for (and, here, missing: the manifest is refused, exit 65).
    @Test func aSyncWithoutTrustAsksForNoSignature() throws {
        let fx = try SyncFixture()
        try TestData.writeFile(at: fx.www + "/img.bin", size: 16 << 20, seed: 121)
        let manifest = fx.www + "/lab.yaml"
        let url = fx.server.baseURL + "/lab.yaml"
        try Self.publish(fx, to: manifest)
        // nginx's validators are the file's size and mtime in seconds: v1's manifest gets a time of
        // its own, so that v2's (the same size) is never answered 304 for being written in the same second.
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_600_000_000)], ofItemAtPath: manifest)
        #expect(try Mirror.run(["sync", url, "--dest", fx.dest], timeout: 120).exitCode == 0)
        _ = try Self.edit(fx.www + "/img.bin", seed: 122)
        try Self.publish(fx, to: manifest)
        let run = try Mirror.run(["sync", url, "--dest", fx.dest], timeout: 120)
        #expect(run.exitCode == 0, "\(run)")
        let log = try fx.requestsSoFar()
        #expect(!log.contains { $0.uri.hasSuffix(".sig") }, "\(log.map { "\($0.status) \($0.uri)" })")
        #expect(!log.contains { $0.status == 404 }, "\(log.map { "\($0.status) \($0.uri)" })")
        #expect(log.contains { $0.uri.hasSuffix("/.mirror-chunks/img.bin") })

        // The control: under --trust the signature is asked for.
        let key = fx.dir.path("key.pub")
        try Data(Self.publicKeyPEM.utf8).write(to: URL(fileURLWithPath: key))
        let trusted = try Mirror.run(["sync", url, "--dest", fx.dest, "--trust", key], timeout: 120)
        #expect(trusted.exitCode == 65, "\(trusted)")
        #expect(try fx.requestsSoFar().contains { $0.uri == "/lab.yaml.sig" && $0.status == 404 })
    }

    /// An Ed25519 public key (RFC 8410) no manifest here is signed with.
    static let publicKeyPEM = """
        -----BEGIN PUBLIC KEY-----
        MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=
        -----END PUBLIC KEY-----

        """
}
