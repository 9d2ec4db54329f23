import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// A full destination, said so that an admin knows what to free: which entry was being written,
/// how many bytes it still needs and how many are free (docs/cli.md, "Space"; it used to say only `cannot write
/// DEST/.mirror/partial/2fcf….part: No space left on device`, a hash that names nothing).
public enum DiskSpace {
    /// Bytes this process may still write on the file system of `folder` (`fstatvfs(2)`):
    /// `f_bavail` blocks, or `f_bfree` for root, who may use the reserved ones; nil when unknown.
    public static func free(in folder: FileDescriptor) -> Int64? {
        var info = statvfs()
        guard fstatvfs(folder.fd, &info) == 0 else { return nil }
        let blocks = geteuid() == 0 ? info.f_bfree : info.f_bavail
        let (bytes, overflow) = Int64(clamping: blocks).multipliedReportingOverflow(by: Int64(clamping: info.f_frsize))
        return overflow ? Int64.max : bytes
    }

    /// The error for people: the entry's path instead of its partial file's hashed name (kept in
    /// brackets, for whoever looks on disk), then `needed` and `free`. Only for `ENOSPC` and
    /// `EDQUOT`; any other error is returned as it is. Under a quota (`EDQUOT`) the free bytes of
    /// the file system are not what this user may write, so they are not given.
    public static func explain(_ error: SystemError, entry: String, needed: Int64, free: Int64?) -> SystemError {
        guard error.code == ENOSPC || error.code == EDQUOT, error.detail == nil else { return error }
        var explained = error
        explained.path = "\(entry) (its partial download \(error.path))"
        var detail = "\(entry) needs \(Formatting.bytes(needed)) more"
        if error.code == ENOSPC, let free { detail += ", \(Formatting.bytes(free)) free" }
        explained.detail = detail + "; free some space (or move DEST) and run again: what is downloaded is kept"
        return explained
    }
}
