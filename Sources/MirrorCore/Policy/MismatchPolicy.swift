/// What follows a download whose bytes are not the manifest's (a checksum mismatch): facts in, a
/// decision out, unit-tested without a server (`Tests/MirrorCoreTests/Policy/MismatchPolicyTests.swift`).
///
/// A cache between mirror and the source (nginx `proxy_cache`, squid, a CDN) serves a corrupt
/// copy again on every plain retry, until the entry expires. So the first mismatch at a URL is
/// followed by an attempt at that same URL that asks caches to revalidate (`Cache-Control:
/// no-cache`, `Pragma: no-cache`, RFC 9111 §5.2.1.4 and §5.4); only then come the other sources.
/// The same wrong digest again from an attempt that revalidated is the source's own content, not
/// damage on the way nor a stale cache: asking it once more would fetch the same bytes
/// (docs/faults.md, docs/fleet.md). Whatever the decision, a wrong file is never installed.
public struct MismatchPolicy: Sendable, Equatable {
    /// Full downloads whose checksum may fail before the entry fails.
    public var attempts: Int

    public init(attempts: Int) {
        self.attempts = attempts
    }

    public struct Facts: Sendable, Equatable {
        /// Mismatches of this entry so far, this one included.
        public var failures: Int
        /// The entry's size: an empty file's digest cannot come out differently on another try.
        public var size: Int64
        /// The attempt that gave these bytes asked caches to revalidate.
        public var revalidated: Bool
        /// This source gave the same wrong digest before.
        public var sameAsBefore: Bool
        /// Another source follows this one.
        public var otherSource: Bool

        public init(failures: Int, size: Int64, revalidated: Bool, sameAsBefore: Bool, otherSource: Bool) {
            self.failures = failures
            self.size = size
            self.revalidated = revalidated
            self.sameAsBefore = sameAsBefore
            self.otherSource = otherSource
        }
    }

    public enum Action: Sendable, Equatable {
        /// Fetch the file again from zero at the same URL, asking caches to revalidate.
        case revalidate
        /// Fetch it from zero at the next source.
        case nextSource
        /// Fetch it from zero at the same URL again (damage on the way differs each time).
        case retry
        /// The entry fails. `sameTwice`: a revalidated attempt gave the same wrong digest as
        /// before, so the source holds other content (republish the manifest or the file).
        case fail(sameTwice: Bool)
    }

    public func decide(_ facts: Facts) -> Action {
        let sameTwice = facts.revalidated && facts.sameAsBefore
        if facts.failures >= attempts || facts.size == 0 { return .fail(sameTwice: sameTwice) }
        if !facts.revalidated { return .revalidate }
        if facts.otherSource { return .nextSource }
        return sameTwice ? .fail(sameTwice: true) : .retry
    }
}
