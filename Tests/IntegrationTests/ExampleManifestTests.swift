import Foundation
import Testing
import MirrorTestSupport

/// The manifests users copy from `manifests/` must be valid: a dry run plans them without error.
@Suite struct ExampleManifestTests {
    static let folder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("manifests").path

    static var examples: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
            .filter { $0.hasSuffix(".yaml") }.sorted()
    }

    @Test func thereAreExamples() {
        #expect(Self.examples.contains("lab-media.yaml"))
        #expect(Self.examples.contains("mirrors.yaml"))
    }

    @Test(arguments: examples)
    func exampleIsValid(name: String) throws {
        let dir = try TemporaryDirectory()
        let result = try Mirror.run(
                              ["sync", Self.folder + "/" + name, "--dest", dir.path("dest"), "--dry-run"],
                              timeout: 30)
        #expect(result.exitCode == 0, "\(name): \(result)")
        #expect(result.stdout.contains("download "), "\(name): \(result.stdout)")
        #expect(!FileManager.default.fileExists(atPath: dir.path("dest")))
    }
}
