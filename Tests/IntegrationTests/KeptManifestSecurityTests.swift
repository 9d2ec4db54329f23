#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// The copy of a remote manifest kept in `DEST/.mirror/manifest/` against a local user who can
/// write in DEST (SECURITY.md): a planted copy is never used, so neither files nor
/// credentials follow its URLs; a kept copy never gives `file:` rights; the copy is private and
/// never holds a credential; planted folders at temporary names do not crash the run.
@Suite(.serialized) struct KeptManifestSecurityTests {
    static let authVariable = "KEPT_COPY_TEST_AUTH"
    static let authValue = "Bearer kept-copy-s3cret"
    static let environment = SyncFixture.loopbackOnly.merging([authVariable: authValue]) { $1 }
    static var isRoot: Bool { geteuid() == 0 }

    static func run(_ url: String, dest: String, _ extra: [String] = []) throws -> ProcessResult {
        try Mirror.run(
                 ["sync", url, "--dest", dest, "--stall-timeout", "2s", "--auth-header-env", authVariable] + extra,
                 environment: environment, loopbackBypass: false, timeout: 90)
    }

    static func write(_ text: String, to path: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    static func digest(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { TestData.sha256(of: Array($0)) }
    }

    /// The attacker's server and a manifest that sends `a.bin` there, with other bytes.
    struct Attacker {
        let server: FaultServer
        let yaml: String
        let bytes: [UInt8]

        init(path: String = "a.bin") throws {
            server = try FaultServer(host: "127.0.0.1")
            bytes = Array("attacker's bytes\n".utf8)
            server.serve("/" + path, bytes: bytes)
            var manifest = ManifestBuilder(baseURL: server.baseURL)
            manifest.add(path: path, size: Int64(bytes.count), sha256: TestData.sha256(of: bytes))
            yaml = manifest.yaml
        }
    }

    /// A copy planted next to the real validators, and a 304 from the real server: the copy does
    /// not match the digest kept with it, so it is discarded (with a warning) and the manifest is
    /// fetched again in full; the attacker's host gets no request and no `Authorization`. The next
    /// run revalidates normally (a discarded copy never blocks later runs).
    @Test func aPlantedCopyIsNotUsedOnA304() throws {
        let fx = try SyncFixture()
        let sha = try fx.addFile("a.bin", size: 4000, seed: 1)
        try fx.manifest.write(to: fx.www + "/manifest.yaml")
        let url = fx.server.url("manifest.yaml")
        let first = try Self.run(url, dest: fx.dest)
        try #require(first.exitCode == 0, "\(first)")

        let attacker = try Attacker()
        try Self.write(attacker.yaml, to: fx.destPath(".mirror/manifest/last.yaml"))
        let second = try Self.run(url, dest: fx.dest)
        #expect(attacker.server.requestCount == 0, "the planted copy was used: \(attacker.server.requests())")
        #expect(second.exitCode == 0, "\(second)")
        #expect(second.stderr.contains("last good copy of the manifest is not used"), "\(second.stderr)")
        #expect(Self.digest(fx.destPath("a.bin")) == sha)
        #expect(try fx.requests(atLeast: 3).filter { $0.uri == "/manifest.yaml" }.map(\.status) == [200, 200])

        let third = try Self.run(url, dest: fx.dest)
        #expect(third.exitCode == 0 && third.stderr.isEmpty, "\(third)")
        #expect(try fx.requests(atLeast: 4).filter { $0.uri == "/manifest.yaml" }.map(\.status) == [200, 200, 304])
    }

    /// The same planted copy while the server answers 503: there is no usable copy, so the run
    /// cannot start (exit 75) and says why; once the server is back, the run works.
    @Test func aPlantedCopyIsNotUsedWhenTheServerIsDown() throws {
        let fx = try FaultFixture()
        let bytes = fx.serve("a.bin", size: 3000, seed: 2)
        let yaml = Array(fx.manifest.yaml.utf8)
        fx.server.serve("/manifest.yaml", bytes: yaml)
        let url = fx.server.url("manifest.yaml")
        try #require(try Self.run(url, dest: fx.dest).exitCode == 0)

        let attacker = try Attacker()
        try Self.write(attacker.yaml, to: fx.dest + "/.mirror/manifest/last.yaml")
        fx.server.serve("/manifest.yaml", bytes: yaml, fault: .status(code: 503, times: Int.max, retryAfter: nil))
        let offline = try Self.run(url, dest: fx.dest)
        #expect(attacker.server.requestCount == 0, "the planted copy was used: \(attacker.server.requests())")
        #expect(offline.exitCode == 75, "\(offline)")
        #expect(offline.stderr.contains("not used"), "\(offline.stderr)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))

        fx.server.serve("/manifest.yaml", bytes: yaml)
        let back = try Self.run(url, dest: fx.dest)
        #expect(back.exitCode == 0, "\(back)")
    }

    /// A `file:` manifest that cannot be read, and a kept copy (its digest made to match, as if
    /// that check had been defeated) with an entry `url: file:///…/secret`: the copy may be used,
    /// but never with `file:` rights, so the secret is not read, installed or described.
    @Test func aKeptCopyNeverGivesFileRights() throws {
        let fx = try SyncFixture()
        try fx.addFile("f.bin", size: 1000, seed: 3)
        try fx.writeManifest()
        let url = "file://" + fx.manifestPath
        try #require(try Self.run(url, dest: fx.dest).exitCode == 0)

        let secret = fx.dir.path("secret.txt")
        let secretBytes = Array("root:$6$not-for-your-eyes:19000:0:99999:7:::\n".utf8)
        try Data(secretBytes).write(to: URL(fileURLWithPath: secret))
        let secretSHA = TestData.sha256(of: secretBytes)
        var planted = ManifestBuilder(baseURL: nil)
        planted.add(path: "stolen", size: Int64(secretBytes.count), sha256: secretSHA, url: "file://" + secret)
        let copy = fx.destPath(".mirror/manifest/last.yaml")
        try Self.write(planted.yaml, to: copy)
        let record = "url\t\(url)\nsha256\t\(TestData.sha256(of: Array(planted.yaml.utf8)))\n"
        try Self.write(record, to: fx.destPath(".mirror/manifest/last.validators"))
        #expect(chmod(copy, 0o600) == 0 && chmod(fx.destPath(".mirror/manifest/last.validators"), 0o600) == 0)
        try FileManager.default.removeItem(atPath: fx.manifestPath)

        let run = try Self.run(url, dest: fx.dest, ["--log-file", fx.dir.path("sync.log")])
        #expect(!fx.exists(fx.destPath("stolen")), "the secret was installed: \(run)")
        #expect(run.exitCode != 0, "\(run)")
        #expect(run.stderr.contains("using the last good copy"), "\(run.stderr)")
        #expect(run.stderr.contains("file: URLs are not read from it"), "\(run.stderr)")
        let partials = (try? FileManager.default.contentsOfDirectory(atPath: fx.destPath(".mirror/partial"))) ?? []
        for name in partials {
            #expect(Self.digest(fx.destPath(".mirror/partial/" + name)) != secretSHA, "the secret was read into \(name)")
        }
    }

    /// A manifest whose `base_url` carries user-info is never written to disk (the copy would hold
    /// the password word for word); a warning says why. A manifest without one is kept 0600 in a
    /// 0700 folder, whatever the umask.
    @Test func theKeptCopyIsPrivateAndNeverHoldsACredential() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 2000, seed: 4)
        try fx.manifest.write(to: fx.www + "/plain.yaml")
        var withPassword = ManifestBuilder(baseURL: fx.server.baseURL.replacingOccurrences(of: "http://", with: "http://ops:pa55word@"))
        withPassword.add(path: "a.bin", size: 2000, sha256: try TestData.sha256(ofFileAt: fx.www + "/a.bin"))
        try withPassword.write(to: fx.www + "/secret.yaml")

        let shell = "umask 000; exec \"$@\""
        let plain = try ChildProcess.run("/bin/sh", ["-c", shell, "sh", try MirrorBinary.path(), "sync", fx.server.url("plain.yaml"),
                                                     "--dest", fx.dest], environment: SyncFixture.loopbackOnly, timeout: 90)
        #expect(plain.exitCode == 0, "\(plain)")
        var info = stat()
        #expect(stat(fx.destPath(".mirror/manifest"), &info) == 0 && info.st_mode & 0o777 == 0o700)
        for name in ["last.yaml", "last.validators"] {
            #expect(stat(fx.destPath(".mirror/manifest/" + name), &info) == 0 && info.st_mode & 0o777 == 0o600, "\(name)")
        }

        let dest = fx.dir.path("dest-2")
        let secret = try Self.run(fx.server.url("secret.yaml"), dest: dest)
        #expect(secret.exitCode == 0, "\(secret)")
        #expect(secret.stderr.contains("not kept"), "\(secret.stderr)")
        #expect(!secret.stderr.contains("pa55word") && !secret.stdout.contains("pa55word"))
        let all = FileManager.default.enumerator(atPath: dest)?.allObjects.compactMap { $0 as? String } ?? []
        for path in all {
            let text = FileManager.default.contents(atPath: dest + "/" + path).map { String(decoding: $0, as: UTF8.self) } ?? ""
            #expect(!text.contains("pa55word"), "\(path) holds the password")
        }
    }

    /// Under `--trust`, a kept copy that is a gzip bomb (its digest made to match) is refused by
    /// its signature before it is gunzipped: the fallback costs no memory and says why.
    @Test func aBombAsTheKeptCopyIsRefusedBeforeItIsGunzipped() throws {
        let keys = try TestKeys()
        let (privateKey, publicKey) = try keys.generateEd25519("lab")
        let fx = try FaultFixture()
        fx.serve("a.bin", size: 1000, seed: 5)
        try fx.manifest.write(to: fx.manifestPath)
        let sign = try Mirror.run(["manifest", "sign", fx.manifestPath, "--key", privateKey], timeout: 60)
        try #require(sign.exitCode == 0, "\(sign)")
        let yaml = Array(try Data(contentsOf: URL(fileURLWithPath: fx.manifestPath)))
        fx.server.serve("/manifest.yaml", bytes: yaml)
        fx.server.serve("/manifest.yaml.sig", bytes: Array(try Data(contentsOf: URL(fileURLWithPath: fx.manifestPath + ".sig"))))
        let url = fx.server.url("manifest.yaml")
        try #require(try Self.run(url, dest: fx.dest, ["--trust", publicKey]).exitCode == 0)

        // 20 gzip members of 64 MiB of zeros each: 1.25 GiB from about 1.3 MB.
        let member = fx.dir.path("member.gz")
        let made = try ChildProcess.run("/bin/sh", ["-c", "head -c 67108864 /dev/zero | gzip -1 > '\(member)'"], timeout: 60)
        try #require(made.exitCode == 0)
        let one = Array(try Data(contentsOf: URL(fileURLWithPath: member)))
        let bomb = Array((0..<20).map { _ in one }.joined())
        let folder = fx.dest + "/.mirror/manifest"
        try Data(bomb).write(to: URL(fileURLWithPath: folder + "/last.yaml"))
        let record = try String(contentsOfFile: folder + "/last.validators", encoding: .utf8)
            .split(separator: "\n").filter { !$0.hasPrefix("sha256\t") }.joined(separator: "\n")
            + "\nsha256\t\(TestData.sha256(of: bomb))\n"
        try Self.write(record, to: folder + "/last.validators")
        #expect(chmod(folder + "/last.yaml", 0o600) == 0 && chmod(folder + "/last.validators", 0o600) == 0)

        fx.server.serve("/manifest.yaml", bytes: yaml, fault: .status(code: 503, times: Int.max, retryAfter: nil))
        let offline = try Self.run(url, dest: fx.dest, ["--trust", publicKey])
        #expect(offline.exitCode == 75, "\(offline)")
        #expect(offline.stderr.contains("signature"), "\(offline.stderr)")
        // ru_maxrss also counts the test process's own peak (posix_spawn shares its memory until
        // exec), so the bound is loose; gunzipping the bomb took 1.1 GB.
        #expect(offline.maxRSSKilobytes < 700_000, "RSS \(offline.maxRSSKilobytes) KiB: the bomb was gunzipped")
    }

    /// Another user (`nobody`, through `setpriv`) who can write in DEST moves `.mirror` aside and
    /// plants a whole `.mirror/manifest` of their own: copy, validators with the real URL and ETag,
    /// and the copy's true sha256. Its folder and files are theirs, so the copy is not used: the
    /// attacker's host gets no request and no `Authorization`.
    @Test(.enabled(if: KeptManifestSecurityTests.isRoot, "needs root to run the attacker as another user"))
    func anotherUsersPlantedFolderIsNotUsed() throws {
        let fx = try SyncFixture()
        let sha = try fx.addFile("a.bin", size: 4000, seed: 6)
        try fx.manifest.write(to: fx.www + "/manifest.yaml")
        let url = fx.server.url("manifest.yaml")
        try #require(try Self.run(url, dest: fx.dest).exitCode == 0)
        // The attacker can learn the ETag by asking the server; the test reads it from the copy.
        let validators = try String(contentsOfFile: fx.destPath(".mirror/manifest/last.validators"), encoding: .utf8)
        let etag = validators.split(separator: "\n").first { $0.hasPrefix("etag\t") }.map(String.init) ?? ""

        let attacker = try Attacker()
        let stage = fx.dir.path("stage")
        try FileManager.default.createDirectory(atPath: stage, withIntermediateDirectories: true)
        try Self.write(attacker.yaml, to: stage + "/last.yaml")
        try Self.write("url\t\(url)\n\(etag)\nsha256\t\(TestData.sha256(of: Array(attacker.yaml.utf8)))\n", to: stage + "/last.validators")
        #expect(chmod(fx.dir.path, 0o755) == 0 && chmod(fx.dest, 0o777) == 0 && chmod(stage, 0o755) == 0)
        let script = "cd \"$1\" && mv .mirror .mirror-aside && mkdir -p .mirror/manifest && chmod 700 .mirror/manifest "
            + "&& cp \"$2/last.yaml\" \"$2/last.validators\" .mirror/manifest/ && chmod 600 .mirror/manifest/*"
        let plant = try ChildProcess.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--",
                                                             "/bin/sh", "-c", script, "sh", fx.dest, stage], timeout: 30)
        try #require(plant.exitCode == 0, "\(plant)")

        let second = try Self.run(url, dest: fx.dest)
        #expect(attacker.server.requestCount == 0, "the planted copy was used: \(attacker.server.requests())")
        #expect(second.stderr.contains("belongs to uid 65534"), "\(second)")
        #expect(Self.digest(fx.destPath("a.bin")) == sha)
    }

    /// Folders planted at every temporary name the old code could use (`.NAME.tmp-<pid>` for the
    /// next few thousand pids): the copy is still replaced, the run exits 0 (it used to recurse
    /// until SIGSEGV, after deleting `last.validators`).
    @Test func foldersAtPidTemporaryNamesDoNotCrashTheRun() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 1000, seed: 7)
        try fx.manifest.write(to: fx.www + "/manifest.yaml")
        let url = fx.server.url("manifest.yaml")
        try #require(try Self.run(url, dest: fx.dest).exitCode == 0)
        try fx.addFile("b.bin", size: 1000, seed: 8)
        try fx.manifest.write(to: fx.www + "/manifest.yaml")

        let folder = fx.destPath(".mirror/manifest")
        let lastPid = Int((try? String(contentsOfFile: "/proc/sys/kernel/ns_last_pid", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? Int(getpid())
        let pidMax = Int((try? String(contentsOfFile: "/proc/sys/kernel/pid_max", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 32768
        for offset in 1...3000 {
            let pid = (lastPid + offset) % pidMax
            for name in ["last.yaml", "last.validators"] { mkdir(folder + "/.\(name).tmp-\(pid)", 0o755) }
        }
        let second = try Self.run(url, dest: fx.dest)
        #expect(second.exitCode == 0 && second.signal == nil, "\(second)")
        #expect(Self.digest(folder + "/last.yaml") == Self.digest(fx.www + "/manifest.yaml"))
        #expect(fx.exists(fx.destPath("b.bin")))
        #expect(fx.exists(folder + "/last.validators"))
    }

    /// A 2 MB gzip manifest that expands to 1.9 GiB: refused once it passes 128 times its size,
    /// with an error that says the limit (it took 1.5 GB of memory to reach the fixed 1 GiB cap).
    @Test func aGzipBombManifestIsRefusedAtAMultipleOfItsSize() throws {
        let dir = try TemporaryDirectory(prefix: "kept-copy-bomb")
        let member = dir.path("member.gz")
        let made = try ChildProcess.run("/bin/sh", ["-c", "head -c 67108864 /dev/zero | gzip -9 > '\(member)'"], timeout: 60)
        try #require(made.exitCode == 0)
        let one = Array(try Data(contentsOf: URL(fileURLWithPath: member)))
        let bomb = Array((0..<30).map { _ in one }.joined())
        try Data(bomb).write(to: URL(fileURLWithPath: dir.path("manifest.yaml.gz")))
        let result = try Mirror.run(["sync", dir.path("manifest.yaml.gz"), "--dest", dir.path("dest")], timeout: 90)
        #expect(result.exitCode == 65, "\(result)")
        #expect(result.stderr.contains("128 times its size"), "\(result.stderr)")
        #expect(result.maxRSSKilobytes < 700_000, "RSS \(result.maxRSSKilobytes) KiB")
    }

    /// Under `--trust`, a kept copy whose signature no longer verifies (the key was rotated and the
    /// manifest re-signed, so the server still answers 304) is discarded and fetched again; it
    /// used to end every later run with exit 65.
    @Test func aKeptCopyRefusedByItsSignatureIsFetchedAgain() throws {
        let keys = try TestKeys()
        let (oldPrivate, oldPublic) = try keys.generateEd25519("old")
        let (newPrivate, newPublic) = try keys.generateEd25519("new")
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 1000, seed: 9)
        let manifestFile = fx.www + "/manifest.yaml"
        try fx.manifest.write(to: manifestFile)
        let first = try Mirror.run(["manifest", "sign", manifestFile, "--key", oldPrivate], timeout: 60)
        try #require(first.exitCode == 0, "\(first)")
        let url = fx.server.url("manifest.yaml")
        try #require(try Self.run(url, dest: fx.dest, ["--trust", oldPublic]).exitCode == 0)

        let sign = try Mirror.run(["manifest", "sign", manifestFile, "--key", newPrivate], timeout: 60)
        try #require(sign.exitCode == 0, "\(sign)")
        let rotated = try Self.run(url, dest: fx.dest, ["--trust", newPublic])
        #expect(rotated.exitCode == 0, "\(rotated)")
        #expect(rotated.stderr.contains("last good copy of the manifest is not used"), "\(rotated.stderr)")
        let next = try Self.run(url, dest: fx.dest, ["--trust", newPublic])
        #expect(next.exitCode == 0 && next.stderr.isEmpty, "\(next)")
    }
}
