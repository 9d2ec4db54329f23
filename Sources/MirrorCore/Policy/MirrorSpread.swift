import MirrorKit

/// Which mirror each segment of a large file is asked at, when its manifest lists several for it
/// (a Metalink file's `<url>`s): facts in, a URL out, unit-tested without a server
/// (`Tests/MirrorCoreTests/Policy/MirrorSpreadTests.swift`; docs/manifest.md, "Metalink 4").
///
/// Segments from several mirrors at once add their links together, as aria2's `-s` does: a mirror
/// 60 ms away capped at 80 Mbit/s per connection and another like it give twice the rate. Each
/// mirror's validator guards only the bytes it sent (``SegmentSource``), and every byte is still
/// checked by the piece hashes and the whole-file digest.
public struct MirrorSpread: Sendable, Equatable {
    /// Mirrors (credentials masked) that sent a piece that did not match its hash: never asked
    /// again for this file in this run.
    public private(set) var dropped: Set<String> = []
    /// Mirrors (credentials masked) whose request failed in the current attempt: not asked again
    /// until the entry's next attempt, while the others carry the file on.
    public private(set) var resting: Set<String> = []
    /// Segment requests each mirror (credentials masked) was given for this file so far.
    public private(set) var served: [String: Int] = [:]
    /// The mirror whose request of this file ended last: its connection is free now.
    public var lastFreed: String?

    public init() {}

    public var isUnused: Bool { dropped.isEmpty && resting.isEmpty && served.isEmpty && lastFreed == nil }

    public mutating func drop(_ sources: Set<String>) { dropped.formUnion(sources) }
    public mutating func rest(_ url: String) { resting.insert(redactedURL(url)) }
    /// A new attempt at the entry asks every mirror not dropped again.
    public mutating func wake() { resting = [] }

    /// The mirrors of `sources` (in the manifest's order) that may still be asked: neither
    /// dropped nor resting, and whose host did not stop answering in this run (`givenUp`).
    public func live(_ sources: [String], givenUp: (String) -> Bool) -> [String] {
        sources.filter { url in
            let shown = redactedURL(url)
            return !dropped.contains(shown) && !resting.contains(shown) && !givenUp(url)
        }
    }

    /// The mirror one segment request goes to, counted as served: the one that sent the
    /// segment's bytes so far (`recorded`, credentials masked), while it is live, so that its
    /// validator guards them (`If-Range`); else the live mirror with the fewest of the file's
    /// requests `running` (their URLs), then, while others run (a widened file), the one whose
    /// request ended last (``lastFreed``: its connection is idle, and taking another mirror would
    /// open a new one beside it), then the
    /// fewest served, then the first in the manifest's order. So segments go round the mirrors
    /// even one at a time, before the file widens: each mirror is tried early, and a wrong piece
    /// or a failure shows while there are others to turn to; and a widened file keeps to as many
    /// connections as requests (three mirrors and `--segments 8` opened 9 when the tie went by
    /// segments served). nil when none is live.
    public mutating func pick(live: [String], recorded: String?, running: [String]) -> String? {
        let chosen: String?
        if let recorded, let same = live.first(where: { redactedURL($0) == recorded }) {
            chosen = same
        } else {
            func load(_ url: String) -> (Int, Int, Int) {
                (running.filter { $0 == url }.count, !running.isEmpty && url == lastFreed ? 0 : 1, served[redactedURL(url)] ?? 0)
            }
            chosen = live.min { load($0) < load($1) }
        }
        if let chosen { served[redactedURL(chosen), default: 0] += 1 }
        return chosen
    }
}
