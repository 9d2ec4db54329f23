import MirrorFS

public enum HoldPolicy {
    /// What a sync knows, under the lock, before it builds anything.
    public struct Facts: Equatable, Sendable {
        /// The hold recorded in the store, if any.
        public var hold: RollbackHold?
        /// The generation DEST shows now; nil when it shows none.
        public var current: Int?
        /// SHA-256 of this run's manifest (nil when it cannot be known: the file could not be
        /// read again).
        public var manifestSHA256: String?

        public init(hold: RollbackHold?, current: Int?, manifestSHA256: String?) {
            self.hold = hold
            self.current = current
            self.manifestSHA256 = manifestSHA256
        }
    }

    public enum Release: Equatable, Sendable {
        /// The manifest is another one than those rolled back from: the publisher moved on.
        case otherManifest
        /// DEST no longer shows the held generation (changed by hand): the hold means nothing.
        case moved
        /// The manifest's digest is unknown: holding on a guess could hold forever.
        case unknownManifest
    }

    public enum Decision: Equatable, Sendable {
        /// No hold: the run goes on as usual.
        case none
        /// Change nothing: DEST stays at the held generation.
        case hold(RollbackHold)
        /// Remove the hold, then go on as usual.
        case release(RollbackHold, Release)
    }

    public static func decide(_ facts: Facts) -> Decision {
        guard let hold = facts.hold else { return .none }
        guard facts.current == hold.generation else { return .release(hold, .moved) }
        guard let digest = facts.manifestSHA256 else { return .release(hold, .unknownManifest) }
        return hold.manifests.contains(digest.lowercased()) ? .hold(hold) : .release(hold, .otherManifest)
    }

    /// The hold after `mirror rollback` switched DEST from generation `from` to `to`. `existing` is
    /// the hold recorded before: a second rollback in a row (it held DEST at `from`) keeps what
    /// that one held against, so neither newer manifest brings its set back. `fromManifest` is the
    /// digest recorded for `from`'s manifest; without one (a generation published by a mirror that
    /// did not record it) there is nothing to hold against but what `existing` carried.
    public static func afterRollback(existing: RollbackHold?, from: Int, to: Int, fromManifest: String?) -> RollbackHold? {
        var manifests = existing.flatMap { $0.generation == from ? $0.manifests : nil } ?? []
        if let digest = fromManifest?.lowercased(), !manifests.contains(digest) { manifests.append(digest) }
        guard !manifests.isEmpty else { return nil }
        return RollbackHold(generation: to, from: from, manifests: manifests)
    }

    /// How to go forward, for the notice, `--json` and `status`.
    public static func releaseAdvice(_ dest: String) -> String {
        "mirror rollback --dest \(dest) --release"
    }
}
