import MirrorKit
/// Whether the files still to fetch fit on DEST's file system, before the first request
/// (docs/cli.md, "Space"): facts in, a decision out, unit-tested without a disk
/// (`Tests/MirrorCoreTests/Policy/SpaceCheckTests.swift`).
///
/// A download is written whole into `.mirror/partial` before the rename puts it in place, and a
/// replaced file's old copy stays until then, so each file to fetch needs its full size on top of
/// what is there, less what its partial file already holds on disk (a resumed download, or a
/// segmented one preallocated with `posix_fallocate`). Sizes are rounded up to whole blocks, as
/// the file system allocates them.
public struct SpaceCheck: Sendable, Equatable {
    /// One file to fetch: its size, and the bytes its partial file already has allocated.
    public struct File: Sendable, Equatable {
        public var size: Int64
        public var allocated: Int64

        public init(size: Int64, allocated: Int64) {
            self.size = size
            self.allocated = allocated
        }
    }

    /// The file system's allocation unit (`statvfs`'s `f_frsize`).
    public var blockSize: Int64

    public init(blockSize: Int64) {
        self.blockSize = max(1, blockSize)
    }

    /// Bytes the run still has to write.
    public func needed(_ files: [File]) -> Int64 {
        files.clampedSum { file in
            let rest = max(0, file.size.addingClamped(-file.allocated))
            return rest.addingClamped(blockSize - 1) / blockSize * blockSize
        }
    }

    /// nil when `needed` fits in `free` (`f_bavail × f_frsize`: what an unprivileged writer may
    /// use, the blocks reserved for root left out, even when root runs mirror, so a full disk
    /// never takes the reserve a system needs to recover).
    public func shortfall(needed: Int64, free: Int64) -> Int64? {
        needed > free ? needed - free : nil
    }
}
