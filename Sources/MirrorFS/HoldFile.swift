import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// What an atomic DEST's state folder (`DEST.generations/.mirror/`) keeps for a rollback that
/// holds (`HoldPolicy`; docs/cli.md, "mirror rollback"):
///
/// - `hold`: the generation DEST is held at, the one it was rolled back from, and the SHA-256 of
///   each manifest a sync of which changes nothing; written by `mirror rollback`, removed by
///   `mirror rollback --release` or by a sync of another manifest.
/// - `built-from`: for each generation, the SHA-256 of the manifest it was built from, written
///   by the sync that publishes it; rollback reads it to know what to hold against.
///
/// Both are small text files written whole (``StateFile``: a temporary file, `fsync`,
/// `renameat(2)`, `fsync` of the folder), so a crash leaves the old file or the new one. Like the journal they must be
/// this user's, writable by nobody else, and regular files (``StateOwnership``): anyone who could
/// write `hold` could stop every sync of DEST.
/// A rollback that holds (docs/cli.md, "mirror rollback"): after `mirror rollback`, DEST stays on
/// the older generation while the manifest is one of those it was rolled back from. Without this
/// the next cron run of the same (newer) manifest built that newer set again and undid the
/// rollback. A pure value: facts in, decision out; the files are ``HoldFile``'s.
public struct RollbackHold: Equatable, Sendable {
    /// The generation DEST was switched back to, and is held at.
    public var generation: Int
    /// The generation DEST was rolled back from (the newest, when rolled back twice).
    public var from: Int
    /// SHA-256 (lowercase hex) of each manifest a sync of which changes nothing: the manifests
    /// the generations rolled back from were built from.
    public var manifests: [String]

    public init(generation: Int, from: Int, manifests: [String]) {
        self.generation = generation
        self.from = from
        self.manifests = manifests
    }
}

package enum HoldFile {
    static let holdName = "hold"
    static let builtFromName = "built-from"
    /// Far above any real file: a bigger one is not mirror's.
    static let maximumSize = 64 << 10

    // MARK: - The hold

    /// The recorded hold, nil when there is none. `trust`: a writing command (sync, rollback)
    /// refuses a file another user could have written; `status` reads it either way.
    package static func readHold(in state: FileDescriptor, trust: Bool = true) throws -> RollbackHold? {
        guard let text = try StateFile.read(holdName, in: state, trust: trust, maximumSize: maximumSize) else { return nil }
        return parseHold(text)
    }

    package static func writeHold(_ hold: RollbackHold, in state: FileDescriptor) throws {
        try StateFile.write(formatHold(hold), to: holdName, in: state)
    }

    /// Removes the hold; true when there was one.
    @discardableResult
    package static func removeHold(in state: FileDescriptor) throws -> Bool {
        if DiskChange.unlinkat(state.fd, holdName, 0) != 0 {
            if errno == ENOENT { return false }
            throw SystemError("remove", state.displayPath + "/" + holdName)
        }
        try state.sync()
        return true
    }

    package static func formatHold(_ hold: RollbackHold) -> String {
        "mirror-hold 1\ngeneration \(hold.generation)\nfrom \(hold.from)\n"
            + hold.manifests.map { "manifest \($0)\n" }.joined()
    }

    /// Nil for text that is not a whole hold: an unknown first line, a missing field, a digest
    /// that is not 64 hex digits. Such a file holds nothing.
    package static func parseHold(_ text: String) -> RollbackHold? {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
        guard lines.first == "mirror-hold 1" else { return nil }
        var generation: Int?
        var from: Int?
        var manifests: [String] = []
        for line in lines.dropFirst() {
            let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { return nil }
            switch parts[0] {
            case "generation": generation = Int(parts[1])
            case "from": from = Int(parts[1])
            case "manifest":
                guard isDigest(parts[1]) else { return nil }
                manifests.append(parts[1])
            default: continue  // a later version's field
            }
        }
        guard let generation, let from, !manifests.isEmpty else { return nil }
        return RollbackHold(generation: generation, from: from, manifests: manifests)
    }

    // MARK: - Which manifest built each generation

    /// Generation number to manifest digest; empty when nothing is recorded.
    package static func builtFrom(in state: FileDescriptor, trust: Bool = true) throws -> [Int: String] {
        guard let text = try StateFile.read(builtFromName, in: state, trust: trust, maximumSize: maximumSize) else { return [:] }
        return parseBuiltFrom(text)
    }

    /// Records that generation `n` was built from the manifest with `digest`, keeping only the
    /// generations in `existing` (a pruned one's line goes with it).
    package static func recordBuiltFrom(_ digest: String, generation n: Int, existing: [Int], in state: FileDescriptor) throws {
        var notes = try builtFrom(in: state).filter { existing.contains($0.key) }
        notes[n] = digest.lowercased()
        try StateFile.write(formatBuiltFrom(notes), to: builtFromName, in: state)
    }

    package static func formatBuiltFrom(_ notes: [Int: String]) -> String {
        notes.sorted { $0.key < $1.key }.map { "g\($0.key) \($0.value)\n" }.joined()
    }

    package static func parseBuiltFrom(_ text: String) -> [Int: String] {
        var notes: [Int: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ").map(String.init)
            guard parts.count == 2, let n = GenerationStore.number(parts[0]), isDigest(parts[1]) else { continue }
            notes[n] = parts[1]
        }
        return notes
    }

    package static func isDigest(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
    }
}
