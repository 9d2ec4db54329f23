import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// TLS verification is always on; `--ca-file` adds a lab CA (SECURITY.md, "Requests"). nginx on
/// loopback serves HTTPS with a certificate signed by a CA the test makes with `openssl`.
@Suite struct TLSTests {
    /// A CA and two server certificates made by `openssl` in a temporary folder: one valid for
    /// 127.0.0.1, one for another name only.
    final class LabCA {
        let dir: TemporaryDirectory
        var caPEM: String { dir.path("ca.pem") }

        init() throws {
            dir = try TemporaryDirectory(prefix: "mirror-ca")
            let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
            try openssl(["req", "-x509"] + key + ["-keyout", dir.path("ca.key"), "-out", caPEM, "-days", "2",
                         "-subj", "/CN=mirror test lab CA",
                         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
            try issue("right", subjectAltName: "IP:127.0.0.1")
            try issue("wrong", subjectAltName: "DNS:files.lab.invalid")
        }

        private func issue(_ name: String, subjectAltName: String) throws {
            let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
            try openssl(["req"] + key + ["-keyout", dir.path("\(name).key"), "-out", dir.path("\(name).csr"),
                         "-subj", "/CN=\(name)"])
            try Data("subjectAltName=\(subjectAltName)\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n".utf8)
                .write(to: URL(fileURLWithPath: dir.path("\(name).ext")))
            try openssl(["x509", "-req", "-in", dir.path("\(name).csr"), "-CA", caPEM, "-CAkey", dir.path("ca.key"),
                         "-CAcreateserial", "-out", dir.path("\(name).pem"), "-days", "2", "-extfile", dir.path("\(name).ext")])
        }

        private func openssl(_ args: [String]) throws {
            let result = try ChildProcess.run("openssl", args, timeout: 30)
            guard result.exitCode == 0 else { throw HarnessError("openssl \(args.joined(separator: " ")): \(result.stderr)") }
        }

        /// An nginx `server` block serving `root` over TLS on `port` with certificate `name`, and
        /// HTTP/2 offered by ALPN where `http2` (nginx 1.22's `listen ... http2`).
        func serverBlock(port: Int, root: String, certificate name: String, http2: Bool = false) -> String {
            """
            server {
                listen 127.0.0.1:\(port) ssl\(http2 ? " http2" : "");
                ssl_certificate "\(dir.path("\(name).pem"))";
                ssl_certificate_key "\(dir.path("\(name).key"))";
                root "\(root)";
            }
            """
        }
    }

    final class Scene {
        let ca: LabCA
        let fx: SyncFixture
        let rightPort: Int
        let wrongPort: Int
        let sha: String

        init() throws {
            ca = try LabCA()
            rightPort = try Loopback.freePort()
            wrongPort = try Loopback.freePort()
            let (ca, rightPort, wrongPort) = (self.ca, self.rightPort, self.wrongPort)
            fx = try SyncFixture(nginxFor: { www in
                NginxServer.Options(extraHTTPConfig: ca.serverBlock(port: rightPort, root: www, certificate: "right")
                    + "\n" + ca.serverBlock(port: wrongPort, root: www, certificate: "wrong"))
            })
            sha = try TestData.writeFile(at: fx.www + "/lab.bin", size: 50_000, seed: 7)
        }

        func useManifest(port: Int) throws {
            fx.manifest = ManifestBuilder(baseURL: "https://127.0.0.1:\(port)/")
            fx.manifest.add(path: "lab.bin", size: 50_000, sha256: sha)
            try fx.writeManifest()
        }
    }

    @Test func aLabCAIsRefusedWithoutCAFileAndTrustedWithIt() throws {
        let scene = try Scene()
        try scene.useManifest(port: scene.rightPort)

        let refused = try scene.fx.sync(["--retries", "0"])
        #expect(refused.exitCode == 1, "\(refused)")
        let output = refused.stdout + refused.stderr
        #expect(output.contains("TLS verification of 127.0.0.1:\(scene.rightPort) failed"), "names the host and the cause: \(output)")
        #expect(output.contains("--ca-file"), "says what helps: \(output)")
        #expect(!scene.fx.exists(scene.fx.destPath("lab.bin")))

        let trusted = try scene.fx.sync(["--ca-file", scene.ca.caPEM])
        #expect(trusted.exitCode == 0, "\(trusted)")
        #expect(try TestData.sha256(ofFileAt: scene.fx.destPath("lab.bin")) == scene.sha)
    }

    /// A certificate from the trusted CA but for another name is still refused: host name
    /// verification is on too.
    @Test func aCertificateForAnotherNameIsRefusedEvenWithTheCA() throws {
        let scene = try Scene()
        try scene.useManifest(port: scene.wrongPort)
        let result = try scene.fx.sync(["--retries", "0", "--ca-file", scene.ca.caPEM])
        #expect(result.exitCode == 1, "\(result)")
        let output = result.stdout + result.stderr
        #expect(output.contains("TLS verification of 127.0.0.1:\(scene.wrongPort) failed"), "\(output)")
        #expect(!scene.fx.exists(scene.fx.destPath("lab.bin")))
    }

    /// A manifest fetched from the lab's HTTPS server is verified with the same `--ca-file` as
    /// the files it lists.
    @Test func aRemoteManifestOverHTTPSUsesTheCAFile() throws {
        let scene = try Scene()
        try scene.useManifest(port: scene.rightPort)
        try FileManager.default.copyItem(atPath: scene.fx.manifestPath, toPath: scene.fx.www + "/manifest.yaml")
        let url = "https://127.0.0.1:\(scene.rightPort)/manifest.yaml"
        let result = try Mirror.run(
                              ["sync", url, "--dest", scene.fx.dest, "--ca-file", scene.ca.caPEM], timeout: 120)
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: scene.fx.destPath("lab.bin")) == scene.sha)
    }

    @Test func anUnreadableCAFileIsAUsageError() throws {
        let fx = try SyncFixture()
        try fx.addFile("a.bin", size: 10, seed: 1)
        try fx.writeManifest()
        let result = try fx.sync(["--ca-file", fx.dir.path("no-such-ca.pem")])
        #expect(result.exitCode == 64, "\(result)")
        #expect(result.stderr.contains("--ca-file"), "\(result.stderr)")
        #expect(try fx.requestsSoFar().isEmpty)
    }
}
