import MirrorFS
import MirrorKit
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// What `mirror verify` found wrong with one entry.
public struct VerifyProblem: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// Nothing at the path.
        case missing
        /// Something is there but it is not the manifest's file: another size, another checksum,
        /// or not a regular file.
        case corrupt
        /// The file could not be read (permissions, an I/O error, a symlink in a folder of the path).
        case unreadable
        /// The bytes are the manifest's, but the manifest's `mode` or `mtime` is not the file's
        /// (checked only where the manifest gives them): the next `sync` sets them.
        case attributes
    }

    public var path: String
    public var kind: Kind
    /// A sentence naming what was expected and what was found.
    public var message: String
    public var expectedSize: Int64
    public var actualSize: Int64?
    public var expectedSHA256: String?
    public var actualSHA256: String?
    public var expectedSHA512: String?
    public var actualSHA512: String?
    /// The `fstat` of the file whose bytes did not match, as it was read: what ``DamageRecord``
    /// compares with the journal's record before it makes the journal forget it.
    public var found: FileStatus?

    init(path: String, kind: Kind, message: String, expectedSize: Int64) {
        self.path = path
        self.kind = kind
        self.message = message
        self.expectedSize = expectedSize
    }
}

/// The outcome of `mirror verify`.
public struct VerifySummary: Sendable {
    public var destination: String
    public var total = 0
    /// Entries of the manifest `--include`/`--exclude` left out (not checked, not in `total`); set by the caller.
    public var excluded = 0
    public var good = 0
    /// In manifest order.
    public var problems: [VerifyProblem] = []
    /// Bytes read and hashed.
    public var bytesRead: Int64 = 0
    public var seconds = 0.0

    public var isGood: Bool { problems.isEmpty }
    /// The destination itself could not be opened (a file, not a folder; no permission): every
    /// entry's problem is this one, which a person needs to read once.
    public var destinationProblem: String?
    /// Corrupt files whose journal record was forgotten so that the next `sync` replaces them
    /// (``DamageRecord``); nil when there was nothing to record or it could not be.
    public var recorded: Int?

    public func count(_ kind: VerifyProblem.Kind) -> Int { problems.filter { $0.kind == kind }.count }
}

/// Progress of a verification, for the terminal display.
public struct VerifyProgress: Sendable {
    public var filesDone: Int
    public var filesTotal: Int
    public var bytesDone: Int64
    public var bytesTotal: Int64
    public var seconds: Double

    public init(filesDone: Int, filesTotal: Int, bytesDone: Int64, bytesTotal: Int64, seconds: Double) {
        self.filesDone = filesDone
        self.filesTotal = filesTotal
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
        self.seconds = seconds
    }
}

/// `mirror verify`: re-reads and re-hashes every file the manifest lists, on every core.
///
/// Trusts nothing but the bytes: the journal is neither read nor written (it is what a verification
/// is meant to second-guess), no lock is taken and nothing on disk changes, so it is safe beside a
/// running sync (which only ever renames complete, verified files into place, so a reader sees the
/// old file or the new one). Every open goes through ``Destination/openForReading(_:)``
/// (`openat` with `O_NOFOLLOW` at each component): a symlink under DEST is reported, never followed.
/// A file of the wrong size is reported without being read.
public final class VerifyRunner {
    let manifest: Manifest
    let destinationPath: String
    let threads: Int

    public init(manifest: Manifest, destinationPath: String, threads: Int = WorkerPool.coreCount) {
        self.manifest = manifest
        self.destinationPath = destinationPath
        self.threads = threads
    }

    /// Verifies every entry. `progress` is called on the calling thread about 10 times a second.
    public func run(progress: ((VerifyProgress) -> Void)? = nil) -> VerifySummary {
        let start = monotonicSeconds()
        var summary = VerifySummary(destination: destinationPath)
        let entries = manifest.entries
        summary.total = entries.count
        let counters = Counters(count: entries.count)
        let bytesTotal = entries.clampedSum(\.size)

        let destination: Destination?
        let openFailure: String?
        do {
            destination = try Destination.openExisting(destinationPath)
            openFailure = nil
        } catch {
            destination = nil
            openFailure = "\(error)"
        }
        summary.destinationProblem = openFailure

        let report = {
            let (files, bytes) = counters.progress
            progress?(VerifyProgress(filesDone: files, filesTotal: entries.count, bytesDone: bytes,
                                     bytesTotal: bytesTotal, seconds: monotonicSeconds() - start))
        }
        let destinationPath = destinationPath
        WorkerPool.run(count: entries.count, threads: threads, onIdle: progress == nil ? nil : report) { index in
            let entry = entries[index]
            let problem: VerifyProblem?
            if let destination {
                problem = VerifyRunner.check(entry, in: destination) { counters.addBytes($0) }
            } else if let openFailure {
                problem = VerifyProblem(path: entry.path, kind: .unreadable, message: openFailure, expectedSize: entry.size)
            } else {
                problem = VerifyProblem(path: entry.path, kind: .missing,
                                        message: "missing (\(destinationPath) does not exist)", expectedSize: entry.size)
            }
            counters.finish(index, problem)
        }

        summary.problems = counters.problems
        summary.good = entries.count - summary.problems.count
        summary.bytesRead = counters.progress.bytes
        summary.seconds = monotonicSeconds() - start
        return summary
    }

    /// Checks one entry; nil when the file is there and every digest the entry lists matches.
    static func check(_ entry: ManifestEntry, in destination: Destination, read: (Int) -> Void) -> VerifyProblem? {
        func problem(_ kind: VerifyProblem.Kind, _ message: String) -> VerifyProblem {
            VerifyProblem(path: entry.path, kind: kind, message: message, expectedSize: entry.size)
        }
        let status: FileStatus
        do {
            guard let found = try destination.status(of: entry.path) else { return problem(.missing, "missing") }
            status = found
        } catch {
            return problem(.unreadable, "\(error)")
        }
        guard status.isRegularFile else {
            let what = status.isDirectory ? "a folder" : status.isSymlink ? "a symbolic link (not followed)" : "not a regular file"
            var p = problem(.corrupt, "is \(what), expected a regular file of \(entry.size) bytes")
            p.actualSize = nil
            return p
        }
        if status.size != entry.size {
            var p = problem(.corrupt, "size mismatch (expected \(entry.size) bytes, got \(status.size))")
            p.actualSize = status.size
            return p
        }
        do {
            let file = try destination.openForReading(entry.path)
            defer { file.close() }
            // The path may have been replaced between the stat and the open (a sync renaming a new
            // version into place): judge the file actually opened (openForReading refused anything
            // but a regular file).
            let opened = try file.stat()
            guard opened.size == entry.size else {
                var p = problem(.corrupt, "size mismatch (expected \(entry.size) bytes, got \(opened.size))")
                p.actualSize = opened.size
                return p
            }
            let digests = try FileHashing.digests(of: file, for: entry, progress: read)
            if FileHashing.matches(entry, digests) {
                guard let wrong = attributesProblem(entry, opened) else { return nil }
                var p = problem(.attributes, wrong)
                p.actualSize = opened.size
                return p
            }
            var p = problem(.corrupt, "checksum mismatch (" + FileHashing.mismatchDescription(entry, digests) + ")")
            p.found = opened
            p.actualSize = opened.size
            p.expectedSHA256 = entry.digests[.sha256]?.hex
            p.actualSHA256 = digests[.sha256]?.hex
            p.expectedSHA512 = entry.digests[.sha512]?.hex
            p.actualSHA512 = digests[.sha512]?.hex
            return p
        } catch let error as SystemError where error.code == ENOENT {
            return problem(.missing, "missing")
        } catch {
            return problem(.unreadable, "\(error)")
        }
    }

    /// What of the manifest's `mode` and `mtime` (where it gives them) the file `status` lacks, as
    /// a sentence; nil when it has both.
    static func attributesProblem(_ entry: ManifestEntry, _ status: FileStatus) -> String? {
        var wrong: [String] = []
        if let mode = entry.mode, status.permissions != mode & 0o7777 {
            wrong.append("mode \(String(status.permissions, radix: 8)), expected \(String(mode, radix: 8))")
        }
        if let mtime = entry.mtime, status.mtime != mtime {
            wrong.append("modification time \(Formatting.utcTimestamp(status.mtime.seconds)), expected \(Formatting.utcTimestamp(mtime.seconds))")
        }
        return wrong.isEmpty ? nil : wrong.joined(separator: "; ")
    }

    /// Results and progress shared by the worker threads.
    private final class Counters: Sendable {
        private struct State {
            var results: [VerifyProblem?]
            var files = 0
            var bytes: Int64 = 0
        }

        private let state: Locked<State>

        init(count: Int) { state = Locked(State(results: Array(repeating: nil, count: count))) }

        func addBytes(_ n: Int) {
            state.withLock { $0.bytes += Int64(n) }
        }

        func finish(_ index: Int, _ problem: VerifyProblem?) {
            state.withLock {
                $0.results[index] = problem
                $0.files += 1
            }
        }

        var progress: (files: Int, bytes: Int64) {
            state.withLock { ($0.files, $0.bytes) }
        }

        var problems: [VerifyProblem] {
            state.withLock { $0.results.compactMap { $0 } }
        }
    }
}

// MARK: - Output

extension VerifySummary {
    /// `mirror verify: 198 good, 1 corrupt, 1 missing; 3.4 GiB read in 5.2 s`.
    public var summaryLine: String {
        var parts = ["\(good) good"]
        for kind in [VerifyProblem.Kind.corrupt, .missing, .unreadable] where count(kind) > 0 {
            parts.append("\(count(kind)) \(kind.rawValue)")
        }
        if count(.attributes) > 0 {
            parts.append("\(count(.attributes)) with another mode or modification time")
        }
        return "mirror verify: " + parts.joined(separator: ", ")
            + " of \(total)" + (excluded > 0 ? " (\(excluded) left out by the filter)" : "")
            + "; \(Formatting.bytes(bytesRead)) read in \(Formatting.duration(seconds))"
    }

    /// One JSON object (``VerifyDocument``).
    public var json: String { JSONOutput.render(VerifyDocument(self)) }
}

extension VerifyProgress {
    /// `verifying 12/200 files, 1.2 GiB of 3.4 GiB, 450.0 MiB/s, ETA 5.0 s`.
    public var line: String {
        var rate = ""
        if seconds > 0.2 && bytesDone > 0 {
            let perSecond = Double(bytesDone) / seconds
            rate = ", \(Formatting.bytes(Int64(perSecond)))/s, ETA \(Formatting.duration(Double(max(0, bytesTotal - bytesDone)) / perSecond))"
        }
        return "verifying \(filesDone)/\(filesTotal) files, \(Formatting.bytes(bytesDone)) of \(Formatting.bytes(bytesTotal))\(rate)"
    }
}
