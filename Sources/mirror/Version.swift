import CBuildInfo

/// The version of `mirror`, written here and nowhere else.
///
/// `mirror --version` prints it, with the commit the binary was built from when the build was
/// given one (``BuildInfo/commit``); `scripts/package` takes the package's version from that
/// output; `VersionTests` checks it against CHANGELOG.md's release headings (Keep a Changelog):
/// the newest `## [X.Y.Z]` is this version, or, while `## [Unreleased]` lists changes, an older
/// one (this is then the release those changes will become).
enum BuildInfo {
    static let version = "0.1.0"

    /// The commit given to the build (`scripts/package`, through `CBuildInfo`), empty for a
    /// plain `swift build`.
    static var commit: String { String(cString: mirror_build_commit()) }

    /// What `mirror --version` prints: `0.1.0`, or `0.1.0 (commit 1a2b3c4d5e6f)`.
    static var versionLine: String {
        commit.isEmpty ? version : "\(version) (commit \(commit))"
    }
}
