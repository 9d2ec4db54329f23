import MirrorFS
#if canImport(Glibc)
import Glibc
#endif

/// Whether a file whose change time moved since the journal verified it, with the same inode,
/// device, size and modification time, still holds the bytes that were verified: facts in, a
/// decision out (docs/journal.md, "When the change time moves").
///
/// The change time moves for much that leaves a file's bytes alone: a hard link made or removed
/// (every publish and every pruning of an atomic DEST, `cp -al`, a backup tool's link farm), a
/// `chown -R` to the same owner, a relabel (`restorecon`), an extended attribute. Requiring it
/// unchanged made the next run hash every such file again and journal it again.
///
/// What the change time adds over the modification time is small. A write by anyone moves the
/// modification time to the current time, and only the file's owner (or root) can set it back to
/// an arbitrary value (`utimensat(2)`: others may set only the current time). So a file that is
/// the running user's, and that neither group nor others may write, can only have had its bytes
/// changed, with the modification time put back to the nanosecond, by this user or root on
/// purpose. The same trade git makes with `core.trustctime = false`, and stricter than rsync's
/// default check (size and modification time alone). A file of another user's, or one that
/// group or others may write, keeps the strict rule: its change time must not have moved.
///
/// `mirror verify` reads every byte and finds what this rule would not.
public struct ChangeTimeTrust: Sendable, Equatable {
    /// This process's effective uid, read once (`geteuid(2)`; mirror never changes its user).
    public static let current = ChangeTimeTrust(user: UInt32(geteuid()))

    /// The user a trusted file must belong to.
    public var user: UInt32

    public init(user: UInt32) {
        self.user = user
    }

    /// True when a moved change time on `status` need not mean moved bytes: a regular file of
    /// ``user``'s with no group or other write bit. The caller has compared inode, device, size
    /// and modification time.
    public func trustsMovedChangeTime(_ status: FileStatus) -> Bool {
        status.isRegularFile && status.owner == user && status.permissions & 0o022 == 0
    }
}
