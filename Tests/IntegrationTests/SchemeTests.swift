import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// Which URL schemes a request may use (SECURITY.md, "Requests"). Redirects to `file:` and other
/// schemes are refused in FaultTests (`aRedirectToAForbiddenSchemeIsRefused`).
@Suite struct SchemeTests {
    /// A local manifest may name a local file with an absolute `file://` URL.
    @Test func aFileURLOfALocalManifestIsFetched() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-scheme")
        let sha = try TestData.writeFile(at: dir.path("src/a.bin"), size: 3000, seed: 1)
        var manifest = ManifestBuilder(baseURL: nil)
        manifest.add(path: "a.bin", size: 3000, sha256: sha, url: "file://" + dir.path("src/a.bin"))
        try manifest.write(to: dir.path("m.yaml"))
        let result = try Mirror.run(["sync", dir.path("m.yaml"), "--dest", dir.path("dest")], timeout: 60)
        #expect(result.exitCode == 0, "\(result)")
        #expect(try TestData.sha256(ofFileAt: dir.path("dest/a.bin")) == sha)
    }

    /// An `--auth-header-env` value with a line break, which would inject a second header, is
    /// refused before any request, without echoing the value.
    @Test func anAuthValueWithALineBreakIsAUsageError() throws {
        let dir = try TemporaryDirectory(prefix: "mirror-scheme")
        var manifest = ManifestBuilder(baseURL: "http://127.0.0.1:9/")
        manifest.add(path: "a.bin", size: 1, sha256: String(repeating: "a", count: 64))
        try manifest.write(to: dir.path("m.yaml"))
        let result = try Mirror.run(
                              ["sync", dir.path("m.yaml"), "--dest", dir.path("dest"), "--auth-header-env", "MIRROR_TEST_AUTH_NL"],
                              environment: ["MIRROR_TEST_AUTH_NL": "Bearer x\r\nX-Evil: 1"],
                              timeout: 60)
        #expect(result.exitCode == 64, "\(result)")
        #expect(result.stderr.contains("line break"), "\(result.stderr)")
        #expect(!result.stderr.contains("X-Evil"), "the value is not echoed")
    }
}
