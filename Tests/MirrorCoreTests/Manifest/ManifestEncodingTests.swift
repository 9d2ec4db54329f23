import Foundation
@testable import MirrorModel
import Testing
@testable import MirrorCore

/// docs/manifest.md says UTF-8. libyaml would detect UTF-16 by its byte-order mark and accept it; the
/// loader refuses such a file, and still reads UTF-8 with or without a BOM.
@Suite struct ManifestEncodingTests {
    private let text = "version: 1\nfiles: []\n"

    @Test func utf16IsRefused() {
        for (name, data) in [("utf-16 (BOM, little-endian)", text.data(using: .utf16LittleEndian).map { Data([0xFF, 0xFE]) + $0 }),
                             ("utf-16 (BOM, big-endian)", text.data(using: .utf16BigEndian).map { Data([0xFE, 0xFF]) + $0 })] {
            guard let data else { Issue.record("cannot encode \(name)"); continue }
            let error = #expect(throws: ManifestError.self, "\(name)") { try ManifestLoader.parse([UInt8](data), sourceName: "m.yaml") }
            #expect(error?.message.contains("manifests must be UTF-8") == true, "\(String(describing: error))")
            #expect(error?.line == 1 && error?.column == 1)
        }
    }

    @Test func utf8WithOrWithoutBOMIsRead() throws {
        let plain = try ManifestLoader.parse(Array(text.utf8), sourceName: "m.yaml")
        let bom = try ManifestLoader.parse([0xEF, 0xBB, 0xBF] + Array("version: 1\r\nfiles: []\r\n".utf8), sourceName: "m.yaml")
        #expect(plain.version == 1 && bom.version == 1 && bom.entries.isEmpty)
    }
}
