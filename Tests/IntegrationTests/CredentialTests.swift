import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// Credentials (URL user-info, `--netrc-file`, `--auth-header-env`) reach only the origin they are
/// meant for, and never any output, the journal or any file under DEST (SECURITY.md,
/// "Credentials"). The receiving fault servers record every request header, and each test first
/// checks that the origin did get the credential, so a test that sees no leak has seen a credential in play.
@Suite struct CredentialTests {
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case urlUserInfo, netrc, headerEnv
        var testDescription: String { rawValue }
    }

    enum Elsewhere: String, CaseIterable, CustomTestStringConvertible {
        /// 127.0.0.2: another host.
        case otherHost
        /// 127.0.0.1 on another port: the same host name, another origin.
        case otherPort
        var testDescription: String { rawValue }
    }

    static let user = "alice"
    static let envName = "MIRROR_TEST_AUTHORIZATION"

    /// Two fault servers, a manifest on the first, and the options that carry the credential.
    final class Scene {
        let dir: TemporaryDirectory
        let origin: FaultServer
        let other: FaultServer
        let dest: String
        let manifestPath: String
        var manifest: ManifestBuilder
        let kind: Kind
        /// Unique per test, so a match can only come from this run.
        let secret = "s3cret-" + String(UInt64.random(in: .min ... .max), radix: 36)
        var args: [String] = []
        var environment = SyncFixture.loopbackOnly

        init(_ kind: Kind, elsewhere: Elsewhere = .otherHost) throws {
            self.kind = kind
            dir = try TemporaryDirectory(prefix: "mirror-cred")
            origin = try FaultServer(host: "127.0.0.1")
            other = try FaultServer(host: elsewhere == .otherHost ? "127.0.0.2" : "127.0.0.1")
            dest = dir.path("dest")
            manifestPath = dir.path("manifest.yaml")
            switch kind {
            case .urlUserInfo:
                manifest = ManifestBuilder(baseURL: "http://\(CredentialTests.user):\(secret)@127.0.0.1:\(origin.port)/")
            case .netrc:
                manifest = ManifestBuilder(baseURL: origin.baseURL)
                let netrc = dir.path("netrc")
                try Data("machine 127.0.0.1 login \(CredentialTests.user) password \(secret)\n".utf8)
                    .write(to: URL(fileURLWithPath: netrc))
                args = ["--netrc-file", netrc]
            case .headerEnv:
                manifest = ManifestBuilder(baseURL: origin.baseURL)
                environment[CredentialTests.envName] = "Bearer \(secret)"
                args = ["--auth-header-env", CredentialTests.envName]
            }
        }

        /// The `Authorization` value the origin must receive.
        var expectedAuthorization: String {
            switch kind {
            case .urlUserInfo, .netrc: return "Basic " + Data("\(CredentialTests.user):\(secret)".utf8).base64EncodedString()
            case .headerEnv: return "Bearer \(secret)"
            }
        }

        /// Every form in which the secret could leak.
        var forms: [String] {
            [secret, Data("\(CredentialTests.user):\(secret)".utf8).base64EncodedString()]
        }

        @discardableResult
        func serve(_ server: FaultServer, _ path: String, size: Int, seed: UInt64, fault: Fault = .none,
                   listedSize: Int? = nil) -> [UInt8] {
            let bytes = TestData.bytes(count: size, seed: seed)
            server.serve("/" + path, bytes: bytes, fault: fault)
            return bytes
        }

        func list(_ path: String, _ bytes: [UInt8]) {
            manifest.add(path: path, size: Int64(bytes.count), sha256: TestData.sha256(of: bytes))
        }

        func sync(_ extra: [String] = []) throws -> ProcessResult {
            try manifest.write(to: manifestPath)
            return try Mirror.run(
                            ["sync", manifestPath, "--dest", dest, "--stall-timeout", "2s", "--retries", "0"] + args + extra,
                            environment: environment, loopbackBypass: false, timeout: 90)
        }
    }

    @Test(arguments: Kind.allCases, Elsewhere.allCases)
    func aRedirectToAnotherOriginNeverReceivesTheCredential(kind: Kind, elsewhere: Elsewhere) throws {
        let scene = try Scene(kind, elsewhere: elsewhere)
        let direct = scene.serve(scene.origin, "direct.bin", size: 3000, seed: 1)
        scene.list("direct.bin", direct)
        let moved = scene.serve(scene.other, "moved.bin", size: 4000, seed: 2)
        scene.origin.serve("/moved.bin", bytes: [], fault: .redirect(to: scene.other.url("/moved.bin")))
        scene.list("moved.bin", moved)

        let result = try scene.sync()

        #expect(result.exitCode == 0, "\(result)")
        let atOrigin = scene.origin.requests()
        #expect(atOrigin.count >= 2 && atOrigin.allSatisfy { $0.headers["authorization"] == scene.expectedAuthorization },
                "the origin gets the credential (else this test proves nothing): \(atOrigin.map { $0.headers["authorization"] ?? "none" })")
        let atOther = scene.other.requests()
        #expect(!atOther.isEmpty, "the redirect was followed")
        for request in atOther {
            #expect(request.headers["authorization"] == nil, "\(elsewhere) got \(request.headers["authorization"] ?? "")")
            let all = request.headers.map { "\($0): \($1)" }.joined(separator: "\n")
            for form in scene.forms { #expect(!all.contains(form), "a header carried the secret: \(all)") }
        }
    }

    /// Successes, a 404, a checksum mismatch and a redirect, in text and `--json` mode, run twice
    /// (the second run reads the journal): the secret appears in no output and in no byte under DEST.
    @Test(arguments: Kind.allCases, [false, true])
    func secretsNeverAppearInOutputOrUnderDest(kind: Kind, json: Bool) throws {
        let scene = try Scene(kind)
        let good = scene.serve(scene.origin, "good.bin", size: 2000, seed: 1)
        scene.list("good.bin", good)
        let missing = TestData.bytes(count: 100, seed: 2)
        scene.origin.serve("/missing.bin", bytes: missing, fault: .status(code: 404, times: Int.max, retryAfter: nil))
        scene.list("missing.bin", missing)
        let corrupt = scene.serve(scene.origin, "corrupt.bin", size: 1500, seed: 3, fault: .flipBytes(at: [10]))
        scene.list("corrupt.bin", corrupt)
        let moved = scene.serve(scene.other, "moved.bin", size: 1200, seed: 4)
        scene.origin.serve("/moved.bin", bytes: [], fault: .redirect(to: scene.other.url("/moved.bin")))
        scene.list("moved.bin", moved)
        let extra = json ? ["--json"] : []

        let first = try scene.sync(extra)
        let second = try scene.sync(extra)

        #expect(first.exitCode == 1 && second.exitCode == 1, "two entries fail: \(first)\n\(second)")
        #expect(scene.origin.requests(for: "/good.bin").first?.headers["authorization"] == scene.expectedAuthorization,
                "the credential was in play")
        #expect(first.stdout.contains("missing.bin") || first.stderr.contains("missing.bin"), "failures are reported: \(first)")
        for form in scene.forms {
            for (name, text) in [("stdout", first.stdout), ("stderr", first.stderr),
                                 ("second stdout", second.stdout), ("second stderr", second.stderr)] {
                #expect(!text.contains(form), "\(name) shows the secret: \(text)")
            }
        }
        let leaks = try CredentialTests.files(under: scene.dest, containingAnyOf: scene.forms)
        #expect(leaks.isEmpty, "files under DEST hold the secret: \(leaks)")
        #expect(FileManager.default.fileExists(atPath: scene.dest + "/.mirror/journal"), "the journal was written and searched")
    }

    /// The files under `root` (all of them, `.mirror` included) whose bytes contain one of `needles`.
    static func files(under root: String, containingAnyOf needles: [String]) throws -> [String] {
        var hits: [String] = []
        guard let walker = FileManager.default.enumerator(atPath: root) else { throw HarnessError("cannot list \(root)") }
        while let relative = walker.nextObject() as? String {
            let path = root + "/" + relative
            var st = stat()
            guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { continue }
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            for needle in needles where bytes.range(of: Data(needle.utf8)) != nil { hits.append(relative) }
        }
        return hits
    }

    /// A `--prefer` source (a site cache, a neighbour) is the machine's choice, not one of the
    /// manifest's sources: the `--auth-header-env` header meant for those does not go there.
    @Test func theAuthorizationHeaderIsNotSentToAPreferredSource() throws {
        let scene = try Scene(.headerEnv)
        let a = scene.serve(scene.origin, "a.bin", size: 30_000, seed: 81)
        let b = scene.serve(scene.origin, "b.bin", size: 30_000, seed: 82)
        scene.other.serve("/a.bin", bytes: a)
        scene.list("a.bin", a)
        scene.list("b.bin", b)
        let result = try scene.sync(["--prefer", scene.other.baseURL])
        #expect(result.exitCode == 0, "\(result)")
        let preferred = scene.other.waitForRequests(count: 2)
        #expect(preferred.map { "\($0.path) \($0.status)" }.sorted() == ["/a.bin 200", "/b.bin 404"], "\(preferred)")
        #expect(preferred.allSatisfy { $0.headers["authorization"] == nil }, "\(preferred)")
        let manifests = scene.origin.waitForRequests(count: 1)
        #expect(manifests.map(\.path) == ["/b.bin"], "\(manifests)")
        #expect(manifests.first?.headers["authorization"] == scene.expectedAuthorization, "the manifest's source still gets it")
    }

    /// netrc credentials go to the origins the manifest names: a `--prefer` source on the same
    /// host name (127.0.0.1, another port) is another origin, and plain http, so it gets no
    /// `Authorization` header, while the manifest's source still does.
    @Test func netrcCredentialsAreNotSentToAPreferredSource() throws {
        let scene = try Scene(.netrc, elsewhere: .otherPort)
        let a = scene.serve(scene.origin, "a.bin", size: 30_000, seed: 91)
        let b = scene.serve(scene.origin, "b.bin", size: 30_000, seed: 92)
        scene.other.serve("/a.bin", bytes: a)
        scene.list("a.bin", a)
        scene.list("b.bin", b)
        let result = try scene.sync(["--prefer", scene.other.baseURL])
        #expect(result.exitCode == 0, "\(result)")
        let preferred = scene.other.waitForRequests(count: 2)
        #expect(preferred.map { "\($0.path) \($0.status)" }.sorted() == ["/a.bin 200", "/b.bin 404"], "\(preferred)")
        #expect(preferred.allSatisfy { $0.headers["authorization"] == nil },
                "the preferred source got \(preferred.map { $0.headers["authorization"] ?? "none" })")
        let manifests = scene.origin.waitForRequests(count: 1)
        #expect(manifests.map(\.path) == ["/b.bin"], "\(manifests)")
        #expect(manifests.first?.headers["authorization"] == scene.expectedAuthorization, "the manifest's source still gets it")
    }

    /// A netrc `default` entry is for the manifest's own origin (scheme, host and port of the
    /// manifest URL): the manifest and its files there get it; another origin the manifest names
    /// (an entry's absolute URL on 127.0.0.2) and a `--prefer` source (127.0.0.1, another port) do not.
    @Test func aNetrcDefaultEntryGoesOnlyToTheManifestsOrigin() throws {
        let scene = try Scene(.netrc, elsewhere: .otherHost)
        let preferred = try FaultServer(host: "127.0.0.1")
        try Data("default login \(CredentialTests.user) password \(scene.secret)\n".utf8)
            .write(to: URL(fileURLWithPath: scene.dir.path("netrc")))
        let a = scene.serve(scene.origin, "a.bin", size: 20_000, seed: 93)
        scene.list("a.bin", a)
        let b = scene.serve(scene.other, "b.bin", size: 20_000, seed: 94)
        scene.manifest.add(path: "b.bin", size: Int64(b.count), sha256: TestData.sha256(of: b), url: scene.other.url("/b.bin"))
        let c = scene.serve(preferred, "c.bin", size: 20_000, seed: 95)
        scene.serve(scene.origin, "c.bin", size: 20_000, seed: 95)
        scene.list("c.bin", c)
        scene.origin.serve("/set.yaml", bytes: Array(scene.manifest.yaml.utf8))

        let result = try Mirror.run(
                              ["sync", scene.origin.url("/set.yaml"), "--dest", scene.dest, "--stall-timeout", "2s",
                               "--retries", "0", "--prefer", preferred.baseURL] + scene.args,
                              environment: scene.environment, loopbackBypass: false, timeout: 90)

        #expect(result.exitCode == 0, "\(result)")
        // The manifest and the file (no signature is asked for without --trust).
        let atOrigin = scene.origin.waitForRequests(count: 2)
        #expect(atOrigin.map(\.path).sorted() == ["/a.bin", "/set.yaml"], "\(atOrigin)")
        #expect(atOrigin.allSatisfy { $0.headers["authorization"] == scene.expectedAuthorization },
                "the manifest's origin gets the default entry: \(atOrigin.map { $0.headers["authorization"] ?? "none" })")
        let atOther = scene.other.waitForRequests(count: 1)
        #expect(atOther.map(\.path) == ["/b.bin"] && atOther.allSatisfy { $0.headers["authorization"] == nil },
                "another origin the manifest names: \(atOther.map { "\($0.path) \($0.headers["authorization"] ?? "none")" })")
        let atPreferred = preferred.waitForRequests(count: 3)
        #expect(atPreferred.count == 3 && atPreferred.allSatisfy { $0.headers["authorization"] == nil },
                "the preferred source: \(atPreferred.map { "\($0.path) \($0.headers["authorization"] ?? "none")" })")
    }

    /// The header value must come from the environment: a missing variable is a usage error that
    /// names the variable, before any request.
    @Test func aMissingAuthVariableIsAUsageError() throws {
        let scene = try Scene(.netrc)
        scene.list("good.bin", scene.serve(scene.origin, "good.bin", size: 100, seed: 1))
        let result = try scene.sync(["--auth-header-env", "MIRROR_TEST_UNSET_VARIABLE"])
        #expect(result.exitCode == 64, "\(result)")
        #expect(result.stderr.contains("MIRROR_TEST_UNSET_VARIABLE"), "\(result.stderr)")
        #expect(scene.origin.requests().isEmpty)
    }
}
