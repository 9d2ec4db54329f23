import MirrorFS
#if canImport(Glibc)
import Glibc
#endif

extension ManifestWriter {
    /// What `manifest create` writes besides `path`, `size` and `sha256`, and where the chunk
    /// indexes go.
    public struct Options: Sendable {
        /// `--mtime`: each file's modification time as `mtime` (docs/manifest.md, "Values"), so
        /// that `sync` sets it on the copy (`futimens(2)`) and the lab keeps the publisher's times.
        public var mtime = false
        /// `--mode`: each file's permission bits as `mode` (`"0644"`); setuid, setgid and sticky
        /// are left out, since the manifest rules refuse them (a download never sets them).
        public var mode = false
        /// `--chunks`: files of at least this many bytes get a chunk index; nil: none do.
        public var chunksAbove: Int64?
        /// `--chunks-dir`: write the indexes here, as `PATH`, instead of under
        /// `DIR/.mirror-chunks/`; the manifest still names `.mirror-chunks/PATH`, which the
        /// publisher serves from this folder (docs/cli.md, "mirror manifest create").
        public var chunksFolder: String?
        /// `--chunks-format`: the index format (docs/manifest.md, "Chunk indexes"); version 1 for a
        /// fleet whose clients read only that one.
        public var chunksFormat: ChunkIndex.Format
        /// `--serial`: the manifest's `serial` (docs/signing.md, "Versions"); nil: none written.
        public var serial: Int64?
        /// `--expires`: the manifest's `expires`, in UTC; nil: none written. Only when asked, so
        /// that an unchanged tree still gives the same bytes.
        public var expires: FileTime?

        public init(mtime: Bool = false, mode: Bool = false, chunksAbove: Int64? = nil, chunksFolder: String? = nil,
                    chunksFormat: ChunkIndex.Format = .binary, serial: Int64? = nil, expires: FileTime? = nil) {
            self.serial = serial
            self.expires = expires
            self.mtime = mtime
            self.mode = mode
            self.chunksAbove = chunksAbove
            self.chunksFolder = chunksFolder
            self.chunksFormat = chunksFormat
        }
    }

    /// The entry's `mtime` and `mode` from `status` (the open file's, so they belong to the bytes
    /// hashed), as `options` asks; a note for what could not be written as it is.
    static func attributes(of file: inout FoundFile, status: FileStatus, options: Options, notes: inout [Skipped]) {
        if options.mtime {
            file.mtime = RFC3339.format(status.mtime)
            if file.mtime == nil {
                notes.append(Skipped(path: file.path, reason: "its modification time is outside the years 0000 to 9999 that RFC 3339 "
                                     + "can write; listed without mtime (fix it with touch)"))
            }
        }
        if options.mode {
            let bits = status.permissions
            file.mode = modeText(bits & 0o777)
            if bits & 0o7000 != 0 {
                notes.append(Skipped(path: file.path, reason: "mode \(modeText(bits)) has setuid, setgid or sticky bits, which a "
                                     + "manifest cannot carry; listed as \(modeText(bits & 0o777))"))
            }
        }
    }

    /// `0644`, `0755`, `4755`: four octal digits.
    static func modeText(_ bits: UInt32) -> String {
        let digits = String(bits, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// The folder the chunk indexes go to with `--chunks-dir`, made (one level, 0755) if missing.
    static func openChunksFolder(_ path: String) throws -> Destination {
        if mkdir(path, 0o755) != 0 && errno != EEXIST { throw SystemError("create the chunk index folder", path) }
        guard let folder = try Destination.openFolder(path, role: "the chunk index folder") else {
            throw SystemError("open the chunk index folder", path, code: ENOENT)
        }
        return folder
    }
}
