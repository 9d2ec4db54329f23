import Foundation
@testable import MirrorModel
import Testing
@testable import MirrorCore

/// The fuzz corpus (`Fuzz/corpus/`) replayed in the ordinary test suite, without libFuzzer: every
/// hostile input is answered with a `ManifestError` (or, for the few valid ones, a manifest), and
/// the valid examples still load, so a corpus file that stops meaning what its name says is noticed.
@Suite struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/corpus")

    static func files(_ target: String) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: corpus.appendingPathComponent(target), includingPropertiesForKeys: nil)
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    @Test func manifestCorpusIsRejectedWithManifestErrorsOrLoads() throws {
        let files = try Self.files("manifest")
        #expect(files.count >= 30)
        var rejected = 0
        for file in files {
            let bytes = [UInt8](try Data(contentsOf: file))
            let name = file.lastPathComponent
            do {
                let manifest = try ManifestLoader.parse(bytes, sourceName: name)
                #expect(name.hasPrefix("valid-") || name == "bom-crlf.yaml", "\(name) was accepted with \(manifest.entries.count) entries")
            } catch let error as ManifestError {
                #expect(!name.hasPrefix("valid-"), "\(error)")
                #expect(error.file == name)
                rejected += 1
            }
        }
        // Everything but the valid-* files and the UTF-8 BOM + CRLF one (which loads) is refused.
        let valid = files.filter { $0.lastPathComponent.hasPrefix("valid-") }.count
        #expect(rejected == files.count - valid - 1)
    }

    @Test func hostileSizesAreRejectedWithAMessage() throws {
        for name in ["size-2pow63.yaml", "size-huge.yaml", "size-odd.yaml"] {
            let bytes = [UInt8](try Data(contentsOf: Self.corpus.appendingPathComponent("manifest/" + name)))
            let error = #expect(throws: ManifestError.self) { try ManifestLoader.parse(bytes, sourceName: name) }
            #expect(error?.line != nil, "\(String(describing: error))")
        }
    }
}
