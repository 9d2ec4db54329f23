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
    /// Why a file or folder may have been written by someone other than this user.
    public enum Problem: Equatable, Sendable {
        /// It belongs to this uid, not to the effective uid.
        case owner(UInt32)
        /// Group or others may write it (these are its permission bits).
        case writableByOthers(mode: UInt32)
    }

    /// The one rule, for `.mirror`, its journal and partial folder, the kept manifest copy, and an
    /// atomic DEST's generation store with its generations:
    /// owned by this process's effective uid, no group or other write bit.
    public static func problem(_ status: FileStatus) -> Problem? {
        if status.owner != geteuid() { return .owner(status.owner) }
        if status.permissions & 0o022 != 0 { return .writableByOthers(mode: status.permissions) }
        return nil
    }

    /// Throws (`EPERM`, so the run stops with exit 73) unless `fd` (`fstat`) passes ``problem(_:)``.
    ///
    /// `mayChown`: the advice may name `chown -R` for another account's earlier runs (a DEST's
    /// state, as the README says); false for a generation store, whose every generation would
    /// have to change hands and which someone else may have made first to steer the switch.
    public static func require(_ fd: FileDescriptor, _ displayPath: String, mayChown: Bool = true) throws {
        let me = geteuid()
        switch problem(try fd.stat()) {
        case nil:
            return
        case .owner(let owner):
            // "chown" only for the case the README describes (a run as another account made it);
            // the folder may also be another user's, planted, and taking it over would keep what
            // they put in it: then removing it is the way.
            let chown = "If a run as uid \(owner) made it (a DEST synced as root, now by a service account): "
                + "chown -R \(me) \(displayPath); otherwise remove it. "
            throw SystemError("trust", displayPath, code: EPERM,
                              detail: "it belongs to uid \(owner), not to uid \(me) who runs mirror"
                                + (mayChown ? ". " + chown : ": remove it (mirror never takes over a store another user made). ") + "Then run again")
        case .writableByOthers(let mode):
            throw SystemError("trust", displayPath, code: EPERM,
                              detail: "others may write it (mode \(String(mode, radix: 8))): chmod go-w \(displayPath), or remove it. Then run again")
        }
    }
}
