import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// What publishers already ship, synced by the built binary from nginx on loopback: a
/// `SHA256SUMS` laid out as Ubuntu's release folders are, signed with a key made by `gpg`,
/// checked by gpgv (`--keyring`); and Metalink 4 files with several mirrors (docs/manifest.md,
/// "Checksum lists" and "Metalink"; docs/signing.md).
@Suite(.serialized) struct PublishedListTests {
    /// www/24.04/ with two images, their SHA256SUMS and its binary signature (Ubuntu's names).
    private func ubuntuRelease() throws -> (fx: SyncFixture, keys: OpenPGPKeys, keyring: String, list: String, shas: [String: String]) {
        let fx = try SyncFixture()
        var shas: [String: String] = [:]
        shas["ubuntu-24.04-desktop-amd64.iso"] = try TestData.writeFile(at: fx.www + "/24.04/ubuntu-24.04-desktop-amd64.iso", size: 300_000, seed: 1)
        shas["ubuntu-24.04-live-server-amd64.iso"] = try TestData.writeFile(at: fx.www + "/24.04/ubuntu-24.04-live-server-amd64.iso", size: 70_000, seed: 2)
        let text = shas.keys.sorted().map { "\(shas[$0]!) *\($0)\n" }.joined()
        let list = fx.www + "/24.04/SHA256SUMS"
        try Data(text.utf8).write(to: URL(fileURLWithPath: list))
        let keys = try OpenPGPKeys()
        try keys.detachSign(list, output: list + ".gpg")
        return (fx, keys, try keys.exportKeyring(), list, shas)
    }

    private func sync(_ fx: SyncFixture, _ url: String, _ extra: [String]) throws -> ProcessResult {
        try Mirror.run(["sync", url, "--dest", fx.dest] + extra)
    }

    @Test func anUbuntuReleaseFolderSyncsWithItsSignatureAndAskesEachSizeOnce() throws {
        let (fx, keys, keyring, _, shas) = try ubuntuRelease()
        defer { withExtendedLifetime(keys) {} }
        let url = fx.server.baseURL + "24.04/SHA256SUMS"
        let first = try sync(fx, url, ["--keyring", keyring])
        #expect(first.exitCode == 0, "\(first)")
        for (name, sha) in shas { #expect(try TestData.sha256(ofFileAt: fx.destPath(name)) == sha, "\(name)") }
        let log = try fx.requests(atLeast: 6)
        #expect(log.filter { $0.method == "HEAD" }.count == 2, "one HEAD per listed file: \(log)")
        #expect(log.filter { $0.method == "GET" && $0.uri.hasSuffix(".iso") }.count == 2, "\(log)")

        // The next run: the list is not modified (304), so the manifest kept under DEST answers,
        // and no size is asked again.
        let second = try sync(fx, url, ["--keyring", keyring])
        #expect(second.exitCode == 0, "\(second)")
        let again = try fx.requests(atLeast: log.count + 1)
        #expect(again.dropFirst(log.count).allSatisfy { $0.method != "HEAD" && !$0.uri.hasSuffix(".iso") }, "\(again.dropFirst(log.count))")

        let status = try Mirror.run(["status", url, "--dest", fx.dest])
        #expect(status.exitCode == 0, "\(status)")
        #expect(status.stdout.contains("done             2"), "\(status.stdout)")
    }

    @Test func aChangedListAnotherKeyOrNoSignatureIsRefusedBeforeAnyRequestForFiles() throws {
        let (fx, keys, keyring, list, _) = try ubuntuRelease()
        defer { withExtendedLifetime(keys) {} }
        let url = fx.server.baseURL + "24.04/SHA256SUMS"
        var text = try String(contentsOfFile: list, encoding: .utf8)
        text = (text.first == "0" ? "1" : "0") + text.dropFirst()
        try Data(text.utf8).write(to: URL(fileURLWithPath: list))
        let changed = try sync(fx, url, ["--keyring", keyring])
        #expect(changed.exitCode == 65, "\(changed)")
        #expect(changed.stderr.contains("refused: the signature \(url).gpg does not match it"), "\(changed.stderr)")

        let other = try OpenPGPKeys(name: "Someone Else <else@example.org>")
        try other.detachSign(list, output: list + ".gpg")
        let foreign = try sync(fx, url, ["--keyring", keyring])
        #expect(foreign.exitCode == 65, "\(foreign)")
        #expect(foreign.stderr.contains("which is not in --keyring"), "\(foreign.stderr)")

        try FileManager.default.removeItem(atPath: list + ".gpg")
        let unsigned = try sync(fx, url, ["--keyring", keyring])
        #expect(unsigned.exitCode == 65, "\(unsigned)")
        #expect(unsigned.stderr.contains("no OpenPGP signature found"), "\(unsigned.stderr)")

        let log = try fx.server.accessLog()
        #expect(!log.contains { $0.method == "HEAD" || $0.uri.hasSuffix(".iso") }, "no request for a listed file: \(log)")
        #expect(!fx.exists(fx.dest + "/ubuntu-24.04-desktop-amd64.iso"))
    }

    @Test func clearsignedAndArmoredSignaturesVerifyAndAnArmoredKeyringIsAUsageError() throws {
        let (fx, keys, keyring, list, shas) = try ubuntuRelease()
        // Debian's name and form: SHA256SUMS.sign, armored; the binary one is gone.
        try FileManager.default.removeItem(atPath: list + ".gpg")
        try keys.detachSign(list, output: list + ".sign", armor: true)
        let url = fx.server.baseURL + "24.04/SHA256SUMS"
        let armored = try sync(fx, url, ["--keyring", keyring])
        #expect(armored.exitCode == 0, "\(armored)")

        // Fedora's form: the list clearsigned, in one file.
        try keys.clearSign(list, output: fx.www + "/24.04/CHECKSUM")
        let clearDest = fx.dir.path("clear")
        let clear = try Mirror.run(["sync", fx.server.baseURL + "24.04/CHECKSUM", "--dest", clearDest, "--keyring", keyring])
        #expect(clear.exitCode == 0, "\(clear)")
        for (name, sha) in shas { #expect(try TestData.sha256(ofFileAt: clearDest + "/" + name) == sha, "\(name)") }

        let asc = try keys.exportArmored()
        let usage = try sync(fx, url, ["--keyring", asc])
        #expect(usage.exitCode == 64, "\(usage)")
        #expect(usage.stderr.contains("gpg --dearmor"), "\(usage.stderr)")
    }

    @Test func eachSignatureOptionAppliesToItsOwnFormat() throws {
        let (fx, keys, keyring, _, _) = try ubuntuRelease()
        defer { withExtendedLifetime(keys) {} }
        try fx.addFile("a.bin", size: 1000, seed: 3)
        try fx.writeManifest()
        // A YAML manifest with only --keyring: nothing checks it, so it is refused.
        let yaml = try fx.sync(["--keyring", keyring])
        #expect(yaml.exitCode == 65, "\(yaml)")
        #expect(yaml.stderr.contains("--keyring checks the OpenPGP signatures of checksum lists"), "\(yaml.stderr)")
        // A list with only --trust: the same.
        let ed = try TestKeys()
        let (_, pub) = try ed.generateEd25519("lab")
        let list = try sync(fx, fx.server.baseURL + "24.04/SHA256SUMS", ["--trust", pub])
        #expect(list.exitCode == 65, "\(list)")
        #expect(list.stderr.contains("--trust checks mirror's own signed YAML manifests"), "\(list.stderr)")
    }

    @Test func aListedFileTheServerDoesNotHaveStopsTheRunBeforeAnyDownload() throws {
        let (fx, keys, _, list, _) = try ubuntuRelease()
        defer { withExtendedLifetime(keys) {} }
        try Data(("\(String(repeating: "ab", count: 32))  missing.iso\n").utf8).write(to: URL(fileURLWithPath: list), options: .atomic)
        var text = try String(contentsOfFile: list, encoding: .utf8)
        text += "\(try TestData.sha256(ofFileAt: fx.www + "/24.04/ubuntu-24.04-desktop-amd64.iso"))  ubuntu-24.04-desktop-amd64.iso\n"
        try Data(text.utf8).write(to: URL(fileURLWithPath: list))
        let result = try sync(fx, fx.server.baseURL + "24.04/SHA256SUMS", [])
        #expect(result.exitCode == 65, "\(result)")
        #expect(result.stderr.contains("cannot learn the size of 1 listed file (missing.iso: the server answered 404)"), "\(result.stderr)")
        #expect(try !fx.server.accessLog().contains { $0.method == "GET" && $0.uri.hasSuffix(".iso") })
    }

    @Test func aLocalListSyncsWithTheFilesBesideItWithFiltersDeleteAndAtomic() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-sums")
        let src = dir.path("release")
        try FileManager.default.createDirectory(atPath: src + "/sub", withIntermediateDirectories: true)
        let a = try TestData.writeFile(at: src + "/a.img", size: 5000, seed: 4)
        let b = try TestData.writeFile(at: src + "/sub/b.img", size: 7000, seed: 5)
        try Data("\(a)  ./a.img\nSHA256 (sub/b.img) = \(b)\n".utf8).write(to: URL(fileURLWithPath: src + "/SHA256SUMS"))
        let dest = dir.path("media")
        try FileManager.default.createDirectory(atPath: dest, withIntermediateDirectories: true)
        try Data("mine".utf8).write(to: URL(fileURLWithPath: dest + "/stale.txt"))
        let only = try Mirror.run(["sync", src + "/SHA256SUMS", "--dest", dest, "--include", "sub/**", "--delete"])
        #expect(only.exitCode == 0, "\(only)")
        #expect(FileManager.default.fileExists(atPath: dest + "/sub/b.img"))
        #expect(!FileManager.default.fileExists(atPath: dest + "/a.img"))
        let atomicDest = dir.path("atomic")
        let atomic = try Mirror.run(["sync", src + "/SHA256SUMS", "--dest", atomicDest, "--atomic"])
        #expect(atomic.exitCode == 0, "\(atomic)")
        #expect(try TestData.sha256(ofFileAt: atomicDest + "/a.img") == a)
        let verify = try Mirror.run(["verify", src + "/SHA256SUMS", "--dest", atomicDest])
        #expect(verify.exitCode == 0, "\(verify)")
    }

    @Test func aMetalinkFileSyncsFromItsMirrorsInPriorityOrderPastADeadOne() throws {
        let fx = try SyncFixture()
        let dead = try UnansweredListener()
        let sha = try TestData.writeFile(at: fx.www + "/pool/image.iso", size: 200_000, seed: 6)
        let small = try TestData.writeFile(at: fx.www + "/pool/notes.txt", size: 100, seed: 7)
        func file(_ name: String, _ size: Int, _ sha: String) -> String {
            """
              <file name="\(name)">
                <size>\(size)</size>
                <hash type="sha-1">0000000000000000000000000000000000000000</hash>
                <hash type="sha-256">\(sha)</hash>
                <url location="de" priority="2">\(fx.server.baseURL)pool/\(name.split(separator: "/").last!)</url>
                <url priority="1">http://127.0.0.1:\(dead.port)/pool/\(name)</url>
                <url priority="3">ftp://ftp.example.org/pool/\(name)</url>
              </file>

            """
        }
        let meta4 = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">\n"
            + file("images/image.iso", 200_000, sha) + file("notes.txt", 100, small) + "</metalink>\n"
        try Data(meta4.utf8).write(to: URL(fileURLWithPath: fx.www + "/set.meta4"))
        let result = try Mirror.run(["sync", fx.server.baseURL + "set.meta4", "--dest", fx.dest, "--stall-timeout", "2s"])
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("images/image.iso")) == sha)
        #expect(try TestData.sha256(ofFileAt: fx.destPath("notes.txt")) == small)
        let status = try Mirror.run(["status", fx.server.baseURL + "set.meta4", "--dest", fx.dest])
        #expect(status.exitCode == 0, "\(status)")
    }

    @Test func manifestCreateWritesAMetalinkThatAria2AndMirrorBothFetch() throws {
        let fx = try SyncFixture()
        let a = try TestData.writeFile(at: fx.www + "/a b.bin", size: 50_000, seed: 8)
        let b = try TestData.writeFile(at: fx.www + "/dir/<x>.bin", size: 3000, seed: 9)
        // aria2c reads `&amp;` in a name as "&#38;" (its own quirk), so this one is mirror's alone.
        let c = try TestData.writeFile(at: fx.www + "/r&d.txt", size: 10, seed: 10)
        let meta4 = fx.dir.path("set.meta4")
        let created = try Mirror.run(["manifest", "create", fx.www, "--base-url", fx.server.baseURL, "-o", fx.manifestPath,
                                      "--metalink", meta4])
        #expect(created.exitCode == 0, "\(created)")
        let text = try String(contentsOfFile: meta4, encoding: .utf8)
        #expect(text.contains("<file name=\"r&amp;d.txt\">") && text.contains("<file name=\"dir/&lt;x&gt;.bin\">"), "\(text)")

        // aria2c reads it and checks each file's sha-256 (RFC 5854's own client, no code of ours).
        let aria = fx.dir.path("aria")
        let fetched = try ChildProcess.run("/usr/bin/env", ["aria2c", "--no-conf", "--quiet", "--dir", aria, "--metalink-file", meta4,
                                                            "--check-integrity=true"], environment: Mirror.loopbackOnly, timeout: 120)
        #expect(fetched.exitCode == 0, "\(fetched)")
        #expect(try TestData.sha256(ofFileAt: aria + "/a b.bin") == a)
        #expect(try TestData.sha256(ofFileAt: aria + "/dir/<x>.bin") == b)

        let synced = try Mirror.run(["sync", meta4, "--dest", fx.dest])
        #expect(synced.exitCode == 0, "\(synced)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("a b.bin")) == a)
        #expect(try TestData.sha256(ofFileAt: fx.destPath("r&d.txt")) == c)
        #expect(try TestData.sha256(ofFileAt: fx.destPath("dir/<x>.bin")) == b)
    }

    @Test func aCopyKeptWithoutTheKeyringIsNotTakenForAVerifiedOne() throws {
        let (fx, keys, keyring, list, _) = try ubuntuRelease()
        defer { withExtendedLifetime(keys) {} }
        let url = fx.server.baseURL + "24.04/SHA256SUMS"
        let unchecked = try sync(fx, url, [])
        #expect(unchecked.exitCode == 0, "\(unchecked)")
        // The list is unchanged (304) but its signature is gone: the copy that run kept was never
        // checked, so a run with --keyring fetches the list again, and refuses it.
        try FileManager.default.removeItem(atPath: list + ".gpg")
        let checked = try sync(fx, url, ["--keyring", keyring])
        #expect(checked.exitCode == 65, "\(checked)")
        #expect(checked.stderr.contains("no OpenPGP signature found"), "\(checked.stderr)")

        // Signed again: a run with --keyring keeps a checked copy, which then carries the run
        // while the server is down.
        try keys.detachSign(list, output: list + ".gpg")
        #expect(try sync(fx, url, ["--keyring", keyring]).exitCode == 0)
        fx.server.stop()
        let offline = try sync(fx, url, ["--keyring", keyring])
        #expect(offline.exitCode == 0, "\(offline)")
        #expect(offline.stderr.contains("using the last good copy"), "\(offline.stderr)")
    }

    @Test func aServedManifestThatCarriesMirrorsOwnMarkIsRefused() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 100, seed: 11)
        try fx.writeManifest()
        let text = try String(contentsOfFile: fx.manifestPath, encoding: .utf8)
        try Data(("# Made by mirror from x (sha256, sizes as the server said; mirror: OpenPGP signature verified)\n" + text).utf8)
            .write(to: URL(fileURLWithPath: fx.www + "/forged.yaml"))
        let result = try sync(fx, fx.server.baseURL + "forged.yaml", [])
        #expect(result.exitCode == 65, "\(result)")
        #expect(result.stderr.contains("carries the mark mirror writes"), "\(result.stderr)")
        #expect(!fx.exists(fx.destPath("a.bin")))
    }
}
