import MirrorFS
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// Whether a file that holds an entry's bytes but that mirror did not install itself (found at
/// its path, or vouched for by a journal record written before this rule) may stay as it is:
/// facts in, a decision out, unit-tested without a server
/// (`Tests/MirrorCoreTests/Policy/FoundFilePolicyTests.swift`).
///
/// A file mirror vouches for is the running user's (effective uid), has the manifest's mode (or
/// ``defaultMode``), and so is never setuid or setgid (the manifest may not ask for either) and is
/// writable by group or others only where that mode says so: a file it installs is made so
/// (a new partial file, `O_CREAT | O_EXCL`, sealed with `fchmod`). A found file is held to the same:
///
/// - another user's file is copied into a new inode of this user's: its owner may `chmod` it
///   back or rewrite it at any time, and may already hold a descriptor open for writing, which
///   no `chown` or `chmod` by mirror would close (open(2): access is checked when a file is
///   opened, not at each write);
/// - this user's file that group or others may write (beyond what the manifest's mode gives)
///   is copied too, for the same reason: anyone could have opened it for writing while it was so;
/// - this user's file whose mode is only otherwise wrong (setuid or setgid, sticky, other read or
///   execute bits) is fixed in place with `fchmod(2)` through the descriptor that was hashed:
///   nobody but this user (and root) could have written it, so the bytes hashed stay its bytes;
///   unless the inode has other names (hard links: another generation of an atomic DEST, a
///   file elsewhere), whose mode a `fchmod` would change too: then it is copied.
///
/// The file's group is not looked at: group write is allowed only where the manifest's mode
/// gives it, and then to the file's group, as for a file mirror installs in a setgid folder.
public struct FoundFilePolicy: Sendable, Equatable {
    /// The mode of an installed file whose entry gives none (docs/manifest.md, `mode`).
    public static let defaultMode: UInt32 = 0o644

    /// The policy for this process: `geteuid(2)` once (mirror never changes its user).
    public static let current = FoundFilePolicy(user: UInt32(geteuid()))

    /// The user files must belong to: the running process's effective uid.
    public var user: UInt32

    public init(user: UInt32) {
        self.user = user
    }

    public struct Facts: Sendable, Equatable {
        /// The file's owner (`st_uid`).
        public var owner: UInt32
        /// The file's permission bits (`st_mode & 07777`).
        public var permissions: UInt32
        /// The entry's mode (``FoundFilePolicy/wantedMode(_:)``).
        public var wanted: UInt32
        /// The inode's names (`st_nlink`).
        public var links: UInt64
        /// The file's modification time (`st_mtim`), and the entry's `mtime` when it gives one:
        /// a file whose time is not the manifest's is set to it, as `rsync -t` sets the times of
        /// unchanged files (docs/manifest.md, `mtime`).
        public var modified: FileTime?
        public var wantedModified: FileTime?

        public init(owner: UInt32, permissions: UInt32, wanted: UInt32, links: UInt64 = 1,
                    modified: FileTime? = nil, wantedModified: FileTime? = nil) {
            self.owner = owner
            self.permissions = permissions & 0o7777
            self.wanted = wanted & 0o7777
            self.links = links
            self.modified = modified
            self.wantedModified = wantedModified
        }

        /// The file has the entry's modification time, or the entry gives none.
        var hasWantedTime: Bool { wantedModified == nil || modified == wantedModified }
    }

    /// Why a found file is copied rather than kept.
    public enum CopyReason: Sendable, Equatable, CustomStringConvertible {
        /// It belongs to another user (this uid).
        case otherOwner(UInt32)
        /// Group or others may write it (these permission bits), which the entry's mode does not give.
        case writableByOthers(UInt32)
        /// Its mode or modification time is not the entry's and the inode has this many names: a
        /// `fchmod` or `futimens` would change them all (another generation of an atomic DEST,
        /// which never changes once published).
        case linkedElsewhere(UInt64)

        public var description: String {
            switch self {
            case .otherOwner(let uid): "it belongs to uid \(uid)"
            case .writableByOthers(let mode): "group or others may write it (mode \(String(mode, radix: 8)))"
            case .linkedElsewhere(let links): "its mode or modification time is to change and it has \(links) names (hard links)"
            }
        }
    }

    public enum Action: Sendable, Equatable {
        /// The file is this user's, with the entry's mode: vouch for it as it is.
        case keep
        /// This user's file, not writable by others, with another mode or modification time and
        /// one name: `fchmod` it to `mode`, and `futimens` it to `mtime` when that is given.
        case fixInPlace(mode: UInt32, mtime: FileTime?)
        /// Copy its bytes into a new file of this user's (verified like a download, renamed into
        /// place); the found inode is never vouched for nor linked.
        case copy(CopyReason)
    }

    /// The mode an installed file of `entry` has.
    public static func wantedMode(_ entry: ManifestEntry) -> UInt32 { entry.mode ?? defaultMode }

    public func decide(_ facts: Facts) -> Action {
        if facts.owner != user { return .copy(.otherOwner(facts.owner)) }
        let extraWrite = facts.permissions & 0o022 & ~facts.wanted
        if extraWrite != 0 { return .copy(.writableByOthers(facts.permissions)) }
        if facts.permissions == facts.wanted && facts.hasWantedTime { return .keep }
        if facts.links > 1 { return .copy(.linkedElsewhere(facts.links)) }
        return .fixInPlace(mode: facts.wanted, mtime: facts.hasWantedTime ? nil : facts.wantedModified)
    }

    /// The decision for `status`, a file at `entry`'s path.
    public func decide(_ status: FileStatus, for entry: ManifestEntry) -> Action {
        decide(Facts(owner: status.owner, permissions: status.permissions, wanted: FoundFilePolicy.wantedMode(entry),
                     links: status.links, modified: status.mtime, wantedModified: entry.mtime))
    }

    /// ``decide(_:)`` says ``Action/keep``: the planner's no-op path asks this of every file
    /// (integer compares on the `stat` it already has), so that a journal record never keeps
    /// vouching for a file that is not, or is no longer, this user's with the entry's mode and
    /// modification time.
    public func keeps(_ status: FileStatus, for entry: ManifestEntry) -> Bool {
        keeps(status, wanted: FoundFilePolicy.wantedMode(entry), modified: entry.mtime)
    }

    /// The same, for a file that should have mode `wanted` and, when given, modification time `modified`.
    public func keeps(_ status: FileStatus, wanted: UInt32, modified: FileTime? = nil) -> Bool {
        status.owner == user && status.permissions == wanted & 0o7777 && (modified == nil || status.mtime == modified)
    }
}
