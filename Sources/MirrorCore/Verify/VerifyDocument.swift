/// The `verify --json` object (docs/cli.md, "mirror verify"), printed through ``JSONOutput``.
///
/// Every field of a problem is always present, `null` where unknown, so a consumer can tell "not
/// known" from "not written". Terminal controls in paths and messages are escaped by
/// ``JSONOutput/render(_:)``.
public struct VerifyDocument: Codable, Equatable, Sendable {
    public struct Files: Codable, Equatable, Sendable {
        public var total: Int
        public var good: Int
        public var corrupt: Int
        public var missing: Int
        public var unreadable: Int
        /// The manifest's bytes with another `mode` or `mtime` than the manifest gives.
        public var attributes: Int
        /// Entries `--include`/`--exclude` left out; not checked, not in `total`.
        public var excluded: Int
    }

    public struct Problem: Codable, Equatable, Sendable {
        public var path: String
        /// `missing`, `corrupt`, `unreadable` or `attributes`.
        public var state: String
        public var error: String
        public var expectedSize: Int64
        public var actualSize: OrNull<Int64>
        /// Lowercase hex, as in the manifest.
        public var expectedSHA256: OrNull<String>
        public var actualSHA256: OrNull<String>
        public var expectedSHA512: OrNull<String>
        public var actualSHA512: OrNull<String>

        enum CodingKeys: String, CodingKey {
            case path, state, error, expectedSize = "expected_size", actualSize = "actual_size"
            case expectedSHA256 = "expected_sha256", actualSHA256 = "actual_sha256"
            case expectedSHA512 = "expected_sha512", actualSHA512 = "actual_sha512"
        }
    }

    /// `ok` or `failed`.
    public var result: String
    /// Corrupt files whose journal record `verify` made the journal forget, so that the next `sync`
    /// replaces them (``DamageRecord``); null when nothing was to be recorded.
    public var recorded: OrNull<Int>
    public var destination: String
    public var files: Files
    public var bytesRead: Int64
    /// To the millisecond.
    public var seconds: Double
    /// In manifest order.
    public var problems: [Problem]

    enum CodingKeys: String, CodingKey {
        case result, destination, files, bytesRead = "bytes_read", seconds, problems, recorded
    }

    public init(_ s: VerifySummary) {
        result = s.isGood ? "ok" : "failed"
        recorded = OrNull(s.recorded)
        destination = s.destination
        files = Files(total: s.total, good: s.good, corrupt: s.count(.corrupt), missing: s.count(.missing),
                      unreadable: s.count(.unreadable), attributes: s.count(.attributes), excluded: s.excluded)
        bytesRead = s.bytesRead
        seconds = (s.seconds * 1000).rounded() / 1000
        problems = s.problems.map { p in
            Problem(path: p.path, state: p.kind.rawValue, error: p.message, expectedSize: p.expectedSize,
                    actualSize: OrNull(p.actualSize),
                    expectedSHA256: OrNull(p.expectedSHA256), actualSHA256: OrNull(p.actualSHA256),
                    expectedSHA512: OrNull(p.expectedSHA512), actualSHA512: OrNull(p.actualSHA512))
        }
    }
}
