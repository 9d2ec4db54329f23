@testable import MirrorCore
@testable import MirrorModel

/// Helpers shared by the manifest tests.
enum ManifestFixture {
    /// SHA-256 of the empty string: a valid 64-digit checksum.
    static let sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    /// SHA-512 of the empty string.
    static let sha512 = "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce"
        + "47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e"

    /// Joins lines with "\n" (and a final "\n"), so that line numbers in a test read off the list.
    static func yaml(_ lines: String...) -> String {
        lines.joined(separator: "\n") + "\n"
    }

    /// A valid manifest with base_url (line 2) and one entry whose mapping starts at 4:5; `extra`
    /// lines go after the entry's sha256 (line 6), so the first extra line is line 7.
    static func oneEntry(path: String = "a", size: String = "1", sha256: String = ManifestFixture.sha256,
                         _ extra: String...) -> String {
        (["version: 1", "base_url: https://example.org/", "files:",
          "  - path: \(path)", "    size: \(size)", "    sha256: \(sha256)"] + extra)
            .joined(separator: "\n") + "\n"
    }

    static func parse(_ text: String, name: String = "m.yaml") throws -> Manifest {
        try ManifestLoader.parse(Array(text.utf8), sourceName: name)
    }

    /// The error a manifest fails with, or nil when it loads.
    static func error(_ text: String) -> ManifestError? {
        error(bytes: Array(text.utf8))
    }

    static func error(bytes: [UInt8]) -> ManifestError? {
        do {
            _ = try ManifestLoader.parse(bytes, sourceName: "m.yaml")
            return nil
        } catch let e as ManifestError {
            return e
        } catch {
            return ManifestError(file: "?", message: "unexpected error type: \(error)")
        }
    }
}
