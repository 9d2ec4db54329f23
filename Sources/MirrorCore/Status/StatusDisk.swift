import MirrorKit

/// DEST opened for `mirror status` on a thread of its own while the manifest is parsed: at 10^6
/// entries the manifest takes the main thread about 1.3 s and DEST's journal another 0.6 s, and
/// the two are independent when `--dest` names DEST (docs/performance.md, "10^6 entries"). The
/// same as `sync --dry-run` does (``ReadOnlyDestination``, ``Background``). The journal is then read a
/// second or so before the files are looked at: beside a running sync, a file installed in
/// between shows as present and not yet verified, which the next `status` corrects; nothing is
/// decided from it. An invalid manifest is still reported first (exit 65); DEST is only read.
///
/// Not `Sendable`: `mirror status` makes it and asks it on its one thread; only the work inside
/// (``Background``) runs on another.
public final class StatusDisk {
    private let path: String
    private let opening: Background<Result<StatusInspector.Opened, Error>>

    public init(destinationPath: String) {
        path = destinationPath
        opening = Background { Result { try StatusInspector.Opened.open(destinationPath) } }
    }

    /// What was opened, when it is `destinationPath` (compared as bytes); nil for another path,
    /// which the caller opens itself. An error opening it is thrown here, where it would have been.
    func opened(for destinationPath: String) throws -> StatusInspector.Opened? {
        guard destinationPath.utf8.elementsEqual(path.utf8) else { return nil }
        return try opening.value().get()
    }
}
