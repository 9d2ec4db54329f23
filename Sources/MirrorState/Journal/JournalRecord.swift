import CZlib
import MirrorFS
import MirrorModel

/// What identifies a manifest entry for the journal: a record made for another size or checksum is
/// obsolete (docs/journal.md, rule 4), so it never vouches for a file the manifest now describes differently.
public struct EntryIdentity: Hashable, Sendable {
    public var path: String
    public var size: Int64
    /// The entry's digests in lowercase hex, as the journal writes them (`sha256=...`). Kept as
    /// text, not parsed: a record compares equal only to the very digests it was written for.
    public var digests: PerAlgorithm<String>

    public init(path: String, size: Int64, digests: PerAlgorithm<String>) {
        self.path = path
        self.size = size
        self.digests = digests
    }

    public init(_ entry: ManifestEntry) {
        self.init(path: entry.path, size: entry.size, digests: entry.digests.mapValues(\.hex))
    }

    /// Whether a file verified as `verified` provably holds other bytes than `entry` wants:
    /// another size, or another digest by an algorithm both name. A manifest that only adds an
    /// algorithm (sha512 beside the same sha256) is not other bytes: that file is hashed, and kept.
    package static func holdsOtherBytes(_ verified: EntryIdentity, _ entry: ManifestEntry) -> Bool {
        if verified.size != entry.size { return true }
        return DigestAlgorithm.allCases.contains { algorithm in
            guard let mine = verified.digests[algorithm], let wanted = entry.digests[algorithm] else { return false }
            return mine != wanted.hex
        }
    }

    /// Paths compare as bytes: Swift's `String ==` is canonical equivalence, under which `café`
    /// spelled NFC and NFD are one path, though they are two files on Linux.
    public static func == (a: EntryIdentity, b: EntryIdentity) -> Bool {
        a.size == b.size && a.digests == b.digests && a.path.utf8.elementsEqual(b.path.utf8)
    }

    public func hash(into hasher: inout Swift.Hasher) {
        hasher.combine(PathKey(path))
        hasher.combine(size)
    }
}

/// A path as its bytes, for dictionary keys and comparisons (docs/journal.md: paths are bytes).
/// A `String` key would merge the NFC and NFD spellings of one name, which are two files here.
public struct PathKey: Hashable, Sendable, Comparable {
    public let bytes: [UInt8]

    public init(_ path: String) { bytes = Array(path.utf8) }

    public init(bytes: [UInt8]) { self.bytes = bytes }

    public var path: String { String(decoding: bytes, as: UTF8.self) }

    public static func < (a: PathKey, b: PathKey) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }
}

/// One line of the journal.
///
/// On disk a record is one line: `CRC KIND key=value ...`, where CRC is zlib's `crc32` of the
/// rest of the line in 8 hex digits. Values are percent-encoded where they hold spaces, `=`, `%`
/// or control characters, so `grep`, `less` and `awk` read the journal as it is (docs/journal.md, rule 6).
public enum JournalRecord: Equatable, Sendable {
    /// A verified file was installed at its path. Its `stat` identity lets a later run skip it.
    case verified(VerifiedRecord)
    /// A partial download: `bytes` of it are durable (fsynced before this record was written).
    case partial(PartialRecord)
    /// The partial file was discarded.
    case forget(path: String)
    /// The file at `path` was deleted (`--delete`), or is no longer mirror's: every record of the
    /// path is dropped, the verified one included. Written as `forget path=... all=1`, so an
    /// older version, which ignores keys it does not know, reads it as a plain `forget`
    /// (docs/journal.md, "Records").
    case removed(path: String)
    /// The entry failed in the last run that tried it (for `mirror status`).
    case failed(FailedRecord)
    /// A run ended.
    case run(RunRecord)
}

public struct VerifiedRecord: Equatable, Sendable {
    public var identity: EntryIdentity
    public var inode: UInt64
    public var device: UInt64
    public var mtime: FileTime
    public var ctime: FileTime
    /// The file was already at its path and mirror only hashed it (`Installer.check(_:)`): mirror
    /// never installed it, so `--delete` never removes it (docs/cli.md, "Deleting"). `found=1`.
    public var adopted: Bool

    public init(identity: EntryIdentity, inode: UInt64, device: UInt64, mtime: FileTime, ctime: FileTime, adopted: Bool = false) {
        self.identity = identity
        self.inode = inode
        self.device = device
        self.mtime = mtime
        self.ctime = ctime
        self.adopted = adopted
    }

    public init(identity: EntryIdentity, status: FileStatus, adopted: Bool = false) {
        self.init(identity: identity, inode: status.inode, device: status.device, mtime: status.mtime, ctime: status.ctime,
                  adopted: adopted)
    }

    /// True when `status` is, by every cheap measure, the very file this record describes:
    /// same size, inode, device, modification time and change time, or a moved change time on a
    /// file ``ChangeTimeTrust`` trusts (this user's, written by nobody else: only its owner could
    /// have put the modification time back after a write).
    public func matches(_ status: FileStatus, trust: ChangeTimeTrust = .current) -> Bool {
        matchesButForChangeTime(status) && (status.ctime == ctime || trust.trustsMovedChangeTime(status))
    }

    /// ``matches(_:trust:)`` with the change time compared whatever the file's owner and mode: what
    /// a removal asks (a deletion, a file in the way of another), where a moved change time (a
    /// `chmod`, a link the user made elsewhere) is a sign the user took the file for their own,
    /// and the file is kept (docs/cli.md, "Deleting").
    public func matchesExactly(_ status: FileStatus) -> Bool {
        matchesButForChangeTime(status) && status.ctime == ctime
    }

    /// ``matches(_:trust:)`` but for the change time: the same inode, size and modification time. A
    /// hard link made or removed moves the ctime too, and an atomic run links every unchanged
    /// file into the next generation (and prunes old ones) before it journals the new ctimes;
    /// `status` beside such a run counts these files as done (docs/cli.md, "status").
    public func matchesButForChangeTime(_ status: FileStatus) -> Bool {
        status.isRegularFile && status.size == identity.size && status.inode == inode
            && status.device == device && status.mtime == mtime
    }
}

public struct PartialRecord: Equatable, Sendable {
    public var identity: EntryIdentity
    /// The URL the bytes came from (credentials masked).
    public var url: String
    /// The server's validator for those bytes: a strong ETag, else a Last-Modified date.
    public var validator: String?
    /// Bytes durable at the start of the partial file. For a segmented download: the prefix the
    /// hash states describe (every byte of it lies in a segment's durable part).
    public var bytes: Int64
    /// The hash states after exactly `bytes` bytes (``HasherSet/savedStates()``: ``Hasher/exportState()``
    /// in hex, `h256=...`), so a resume need not read the prefix again.
    public var hashStates: PerAlgorithm<String>
    /// A segmented download (docs/journal.md, rule 3: "bytes durable per segment when segmented"): each
    /// segment's range and how much of it, from its start, is durable. nil for one stream.
    public var segments: [SegmentRecord]?
    /// The partial file these bytes are in: its inode and change time, taken (`fstat`) before the
    /// `fdatasync` that made them durable. The saved hash states are only ever restored over that
    /// very inode (``describes(_:owner:)``; docs/journal.md, "Partial records"): a record is bound
    /// to one file, never to a path alone. nil in records of older versions: their states are
    /// never trusted, the prefix is hashed again. The change time is still written (versions
    /// before trusted resumes compare it) but no longer compared.
    public var fileInode: UInt64?
    public var fileChangeTime: FileTime?

    public init(identity: EntryIdentity, url: String, validator: String?, bytes: Int64,
                hashStates: PerAlgorithm<String> = [:], segments: [SegmentRecord]? = nil,
                fileInode: UInt64? = nil, fileChangeTime: FileTime? = nil) {
        self.identity = identity
        self.url = url
        self.validator = validator
        self.bytes = bytes
        self.hashStates = hashStates
        self.segments = segments
        self.fileInode = fileInode
        self.fileChangeTime = fileChangeTime
    }

    /// Whether the saved hash states may be restored over `status` (docs/journal.md, rule 8): it
    /// is the partial file this record was written for (same inode), a regular file with one
    /// name, owned by `owner` (this process's effective uid), mode 0600 as mirror left it, and it
    /// still holds the `bytes` the states describe (the caller cuts what lies past them).
    ///
    /// The change time is not compared: a run killed (SIGKILL, a power cut) after a checkpoint
    /// had written past it, which moves the change time though the durable prefix is as recorded;
    /// comparing it made every such resume read the whole prefix again. Nobody else can have
    /// written the file: `DEST/.mirror/partial` is this user's alone (``StateOwnership``), and a
    /// partial file is created `O_EXCL`, mode 0600. What this takes on trust is that this user
    /// (or root) did not overwrite the prefix in place since: the final digest is computed from
    /// the restored state, so it would not see that; `mirror verify` reads the file.
    public func describes(_ status: FileStatus, owner: UInt32) -> Bool {
        guard let fileInode else { return false }
        return status.isRegularFile && status.links == 1 && status.owner == owner && status.permissions == 0o600
            && status.inode == fileInode && status.size >= bytes
    }

    /// Durable bytes in all: the prefix, or the sum of the segments' durable parts.
    public var durableBytes: Int64 {
        guard let segments else { return bytes }
        return segments.reduce(0) { $0 + $1.done }
    }
}

/// One segment of a segmented download: bytes `[start, end)` of the file, of which `[start, start + done)`
/// are durable. Written in the journal as `START:END:DONE`, segments separated by commas.
public struct SegmentRecord: Equatable, Sendable {
    public var start: Int64
    public var end: Int64
    public var done: Int64
    /// Where the segment's durable bytes came from, when a file's segments come from several
    /// mirrors at once (docs/journal.md, `srcs` and `segsrc`): the URL (credentials masked) and
    /// that server's validator, sent as `If-Range` to it alone. nil for a file from one source.
    public var source: SegmentSource?

    public init(start: Int64, end: Int64, done: Int64, source: SegmentSource? = nil) {
        self.start = start
        self.end = end
        self.done = done
        self.source = source
    }

    /// The segments of a `segs=` value, or nil when it is malformed: together they must cover
    /// `[0, size)` in order, each starting where the previous one ended, with `done` within its length.
    static func parseList(_ text: String, size: Int64) -> [SegmentRecord]? {
        var out: [SegmentRecord] = []
        var previousEnd: Int64 = 0
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = item.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 3, let start = Int64(parts[0]), let end = Int64(parts[1]), let done = Int64(parts[2]),
                  start == previousEnd, start < end, end <= size, done >= 0, done <= end - start else { return nil }
            out.append(SegmentRecord(start: start, end: end, done: done))
            previousEnd = end
        }
        return out.isEmpty || previousEnd != size ? nil : out
    }

    static func listText(_ segments: [SegmentRecord]) -> String {
        segments.map { "\($0.start):\($0.end):\($0.done)" }.joined(separator: ",")
    }

    /// `srcs=`: each source once, `URL` and `VALIDATOR` joined by a tab, one a line (a URL holds
    /// neither; a validator with either is not kept); `segsrc=`: per segment, the number of its
    /// source in that list, `-` for none. nil when no segment has a source.
    static func sourcesText(_ segments: [SegmentRecord]) -> (list: String, indexes: String)? {
        guard segments.contains(where: { $0.source != nil }) else { return nil }
        var sources: [SegmentSource] = []
        var indexes: [String] = []
        for segment in segments {
            guard let source = segment.source else {
                indexes.append("-")
                continue
            }
            if let known = sources.firstIndex(of: source) {
                indexes.append(String(known))
            } else {
                sources.append(source)
                indexes.append(String(sources.count - 1))
            }
        }
        let list = sources.map { $0.url + "\t" + ($0.validator ?? "") }.joined(separator: "\n")
        return (list, indexes.joined(separator: ","))
    }

    /// Reads `srcs=` and `segsrc=` (``sourcesText(_:)``) into `list`; false when they are malformed
    /// (a count that is not the segments', a number past the list).
    static func attachSources(list text: String, indexes: String, to list: inout [SegmentRecord]) -> Bool {
        let sources = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> SegmentSource in
            let parts = line.split(separator: "\t", maxSplits: 1, omittingEmptySubsequences: false)
            let validator = parts.count > 1 && !parts[1].isEmpty ? String(parts[1]) : nil
            return SegmentSource(url: String(parts[0]), validator: validator)
        }
        let numbers = indexes.split(separator: ",", omittingEmptySubsequences: false)
        guard numbers.count == list.count else { return false }
        for (i, number) in numbers.enumerated() where number != "-" {
            guard let n = Int(number), sources.indices.contains(n), !sources[n].url.isEmpty else { return false }
            list[i].source = sources[n]
        }
        return true
    }
}

/// One mirror a segment's bytes came from: its URL (credentials masked) and its validator.
public struct SegmentSource: Equatable, Sendable {
    public var url: String
    public var validator: String?

    public init(url: String, validator: String?) {
        self.url = url
        // A validator holding the list's separators is not kept: the segment is then continued
        // without If-Range, and the digests still check every byte.
        self.validator = validator.flatMap { $0.contains("\t") || $0.contains("\n") ? nil : $0 }
    }
}

public struct FailedRecord: Equatable, Sendable {
    public var identity: EntryIdentity
    public var error: String
    public var time: Int64

    public init(identity: EntryIdentity, error: String, time: Int64) {
        self.identity = identity
        self.error = error
        self.time = time
    }
}

public struct RunRecord: Equatable, Sendable {
    public var start: Int64
    public var end: Int64
    public var result: String
    public var downloaded: Int
    public var failed: Int
    public var bytes: Int64
    /// Why the run stopped early or could not write (`reason=`), for `mirror status` after the
    /// run: "incomplete: 0 downloaded, 0 failed" alone told a full disk from nothing (docs/cli.md, "mirror status").
    public var reason: String?
    /// Where the run's manifest came from (`manifest=`, ``ManifestSource/rawValue``): `status`
    /// shows a machine kept in sync with a saved copy while its server is down (docs/cli.md, "Where the manifest came from").
    public var manifest: String?

    public init(start: Int64, end: Int64, result: String, downloaded: Int, failed: Int, bytes: Int64,
                reason: String? = nil, manifest: String? = nil) {
        self.start = start
        self.end = end
        self.result = result
        self.downloaded = downloaded
        self.failed = failed
        self.bytes = bytes
        self.reason = reason
        self.manifest = manifest
    }

    /// A run that left every entry present and verified.
    public var succeeded: Bool { result == "ok" }
}
