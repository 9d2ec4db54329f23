/// A file in DEST as it was seen when a run planned to remove it: removed later only if it still
/// is that file (``Destination/removeFile(_:expected:)``). Paths are bytes, relative to DEST.
public struct SeenFile: Sendable {
    /// Relative to DEST.
    public var path: [UInt8]
    /// The file as seen when planned: it is removed only if it still is that file.
    public var status: FileStatus

    public init(path: [UInt8], status: FileStatus) {
        self.path = path
        self.status = status
    }

    public var display: String { String(decoding: path, as: UTF8.self) }
}

/// What is in the way of a listed path: a file where the entry needs a folder, or a folder where
/// it needs a file (docs/cli.md, "A path that turns"). Found by ``Destination/inTheWay(of:)``;
/// whether it may go is the planner's decision.
public struct InTheWay: Sendable {
    /// The path in the way: a folder of the entry's path that is not a folder, or the entry's
    /// own path when it is a folder.
    public var path: [UInt8]
    /// Everything there that is not a folder, with its status (the path itself when it is not a
    /// folder; links and devices too, so that they block).
    public var files: [SeenFile]
    /// Every folder, `path` itself included when it is one.
    public var folders: [[UInt8]]

    public init(path: [UInt8], files: [SeenFile], folders: [[UInt8]] = []) {
        self.path = path
        self.files = files
        self.folders = folders
    }

    /// What may go so that the entry's file can be placed: ``files`` (each removed only if it is
    /// still the file seen, ``Destination/removeFile(_:expected:)``), then ``folders``, deepest
    /// first (``Destination/clear(_:)``).
    public struct Clearance: Sendable {
        /// Each with the status it was decided on.
        public var files: [SeenFile]
        public var folders: [[UInt8]]

        public init(files: [SeenFile], folders: [[UInt8]]) {
            self.files = files
            self.folders = folders
        }
    }
}
