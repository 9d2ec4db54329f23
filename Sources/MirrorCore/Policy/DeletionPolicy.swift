import MirrorKit

/// Whether a run may delete what it found to delete: facts in, a decision out, unit-tested without
/// a server or a file system (`Tests/MirrorCoreTests/Policy/DeletionPolicyTests.swift`).
///
/// The guardrails come from other tools' disasters (docs/cli.md, "Deleting"): rclone's `sync`
/// emptied whole remotes when the source was empty or a listing failed (rclone#4298, #1574; the
/// request to abort on an empty source, rclone#1032, is still open). So mirror deletes only
/// after a run in which every listed file verified, never for a manifest without files, and
/// never more than `--max-delete` at once: past the limit it deletes nothing at all, because a
/// part of a mistaken purge is still a purge.
public struct DeletionPolicy: Sendable, Equatable {
    public var limit: DeleteLimit
    /// The run switches an atomic DEST's generation without `--atomic` on its command line, where
    /// `--max-delete` alone is a usage error: the way past the limit names both.
    public var remedyNeedsAtomic = false

    public init(limit: DeleteLimit = .default, remedyNeedsAtomic: Bool = false) {
        self.limit = limit
        self.remedyNeedsAtomic = remedyNeedsAtomic
    }

    public struct Facts: Sendable, Equatable {
        /// Files the run would delete.
        public var candidates: Int
        /// Files the percentage counts from: the verified files the journal knows (`--delete`), or
        /// every file in DEST (`--delete-unlisted`).
        public var known: Int
        /// Entries the manifest lists.
        public var listed: Int
        /// Every listed entry is verified and in place, and the run was not stopped.
        public var everyFileVerified: Bool

        public init(candidates: Int, known: Int, listed: Int, everyFileVerified: Bool) {
            self.candidates = candidates
            self.known = known
            self.listed = listed
            self.everyFileVerified = everyFileVerified
        }
    }

    public enum Decision: Sendable, Equatable {
        /// Nothing to delete.
        case nothing
        case delete
        /// The run did not verify every listed file: deleting waits for a run that does. Not a
        /// failure of its own (the run already says what failed).
        case waitForCompleteRun
        /// The manifest lists no files: deleting would empty DEST. Refused, exit 1.
        case refuseEmptyManifest(candidates: Int)
        /// More than the limit. Refused, exit 1.
        case refuseTooMany(candidates: Int, allowed: Int, known: Int)
    }

    public func decide(_ facts: Facts) -> Decision {
        guard facts.candidates > 0 else { return .nothing }
        guard facts.listed > 0 else { return .refuseEmptyManifest(candidates: facts.candidates) }
        let allowed = limit.allowed(outOf: facts.known)
        guard facts.candidates <= allowed else {
            return .refuseTooMany(candidates: facts.candidates, allowed: allowed, known: facts.known)
        }
        return facts.everyFileVerified ? .delete : .waitForCompleteRun
    }

    /// Why nothing was deleted, for a person: the count, the limit and the way to go past it.
    public func refusal(_ decision: Decision) -> String? {
        let withAtomic = remedyNeedsAtomic
        switch decision {
        case .refuseEmptyManifest(let n):
            return "deleted nothing: the manifest lists no files, and deleting would remove all \(n) \(Self.files(n)) "
                + "mirror installed (an empty manifest is more often a failed publish than an intent)"
        case .refuseTooMany(let n, let allowed, let known):
            return "deleted nothing: the run would delete \(n) of \(known) \(Self.files(known)), more than --max-delete "
                + "\(limit) allows (\(allowed)); check the manifest, then run again with \(withAtomic ? "--atomic " : "")--max-delete \(n) to allow it"
                + (withAtomic ? " (DEST is atomic; --max-delete goes with --atomic)" : "")
        case .nothing, .delete, .waitForCompleteRun:
            return nil
        }
    }

    static func files(_ n: Int) -> String { n == 1 ? "file" : "files" }
}
