import MirrorKit
import MirrorModel

/// Which URLs an entry is asked at, in order: the `--prefer` bases first (a site cache or a
/// neighbour, set on the machine and outside the signed manifest), then the manifest's own
/// sources (`base_url`, then each mirror, or the entry's absolute URL). Facts in, a list out,
/// unit-tested without a server (`Tests/MirrorCoreTests/Policy/SourceOrderTests.swift`).
///
/// A preferred base serves the set's layout: an entry is asked at BASE_URL + its path in DEST,
/// percent-encoded as an entry's default `url` is (``URLReference/encodePath(_:)``). It is trusted
/// with nothing: every byte is checked against the manifest's digests, and a 404 or a mismatch
/// there moves the entry on to the manifest's sources (docs/fleet.md).
public struct SourceOrder: Sendable, Equatable {
    /// The `--prefer` bases, in the order given, each ending in "/".
    public let preferred: [String]

    public init(preferred: [String] = []) {
        self.preferred = preferred
    }

    /// The URLs to try for `entry`, given the manifest's own list for it. A preferred URL that is
    /// also one of the manifest's sources is asked once, in its preferred place.
    public func sources(forPath path: String, manifestSources: [String]) -> [String] {
        guard !preferred.isEmpty else { return manifestSources }
        let encoded = URLReference.encodePath(path)
        var order = preferred.map { $0 + encoded }
        for source in manifestSources where !order.contains(source) { order.append(source) }
        return order
    }

    /// Whether `url` (one of ``sources(forPath:manifestSources:)``) comes from `--prefer`: it is not
    /// one of the manifest's sources, so the `--auth-header-env` header meant for those stays away from it.
    public func isPreferred(_ url: String) -> Bool {
        preferred.contains { url.hasPrefix($0) }
    }

    /// Checks one `--prefer` value: an `http://` or `https://` URL with a host and without a query
    /// or fragment (the entry's path is appended to it). Returns it ending in "/".
    @Sendable public static func parseBase(_ text: String) throws -> String {
        let lowered = text.lowercased()
        guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://"), let parts = URLParts(text),
              !parts.hostAndPort.isEmpty, !text.utf8.contains(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }),
              !text.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
            throw ArgumentValueError.notABaseURL
        }
        return text.hasSuffix("/") ? text : text + "/"
    }
}
