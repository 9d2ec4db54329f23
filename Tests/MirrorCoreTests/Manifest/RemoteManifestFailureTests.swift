import Testing
@testable import MirrorCore

/// What a remote manifest's failures end a run with (docs/cli.md, "Exit codes"): a server that
/// says there is no manifest (404, 410) is a failed run, not "try again later", and the message
/// names the URL with its user-info masked.
@Suite struct RemoteManifestFailureTests {
    @Test func notFoundIsExitOneAndNamesTheMaskedURL() {
        let failure = RemoteManifest.Failure.notFound(url: "https://ops:s3cret@media.example.org/lab/lba.yaml", status: 404)
        #expect(failure.exitStatus == ExitStatus.entriesFailed)
        #expect(failure.description.hasPrefix("https://***@media.example.org/lab/lba.yaml: the server answered 404 (Not Found)"),
                "\(failure.description)")
        #expect(!failure.description.contains("s3cret"))
        #expect(RemoteManifest.Failure.notFound(url: "http://h/m.yaml", status: 410).description.contains("410 (Gone)"))
    }

    @Test func anUnreachableManifestIsStillTryLater() {
        #expect(RemoteManifest.Failure.unreachable(url: "http://h/m.yaml", reason: "refused").exitStatus == ExitStatus.tryLater)
    }
}
