#if canImport(Glibc)
import Glibc
#endif

/// Whether mirror may trust what it keeps under `DEST/.mirror/`: the folders and the journal
/// must belong to the user running mirror and be writable by nobody else (SECURITY.md, "a local
/// user who can write in DEST"). Anyone who can write there could plant a journal record, a
/// partial file or a kept manifest; a folder that fails this check is refused, never used, and
/// the message says how to recover (remove it: mirror rebuilds it, at the cost of re-hashing or
/// re-fetching).
///
/// A user who can write DEST itself can still rename `.mirror` away and put their own in its
/// place; that one then belongs to them, and this check refuses it.
public enum StateOwnership {
    /// Throws (`EPERM`, so the run stops with exit 73) unless `fd` (`fstat`) belongs to this
    /// process's effective uid and has no group or other write bit.
    public static func require(_ fd: FileDescriptor, _ displayPath: String) throws {
        let status = try fd.stat()
        let me = geteuid()
        if status.owner != me {
            throw SystemError("trust", "\(displayPath) (it belongs to uid \(status.owner), not to uid \(me) who runs mirror; "
                + "remove it, or chown it to uid \(me), and run again)", code: EPERM)
        }
        if status.permissions & 0o022 != 0 {
            throw SystemError("trust", "\(displayPath) (others may write it: mode \(String(status.permissions, radix: 8)); "
                + "chmod go-w it, or remove it, and run again)", code: EPERM)
        }
    }
}
