import ArgumentParser
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif
import MirrorCore
import MirrorFS
import MirrorKit

/// `mirror manifest`: commands that make manifests.
struct ManifestGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "manifest",
        abstract: "Create manifests from folders, and sign them for `mirror sync --trust`.",
        subcommands: [Create.self, ManifestSign.self]
    )

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a manifest of a folder's files, to publish the folder with a web server.",
            discussion: """
                Lists every regular file under DIR with its size and SHA-256, sorted by path, in a \
                fixed layout with no time of writing: the same tree always gives the same bytes. \
                Files are hashed on every core. Each file's URL is its path under --base-url, which \
                is where a web server serving DIR publishes it. With --mtime and --mode (or \
                --preserve for both) each entry also carries the file's modification time and \
                permission bits, which sync sets on every copy; setuid, setgid and sticky bits are \
                left out, with a note. One summary line (files, bytes, chunk indexes) follows on \
                standard error, unless --quiet.

                Skipped, with a note on standard error: symbolic links (never followed), anything \
                that is not a regular file or folder, and names a manifest cannot hold (not UTF-8, \
                control characters, backslashes). Left out without a note: DIR/.mirror (mirror's own \
                state), the -o file and its signature (FILE.sig), so that a folder can be republished \
                in place, and whatever matches an --exclude pattern; empty folders do not appear.

                With --chunks, every file of at least --chunks-above bytes also gets a chunk \
                index, written to DIR/.mirror-chunks/PATH (replaced atomically) and named in its \
                entry with its size and SHA-256, so a signed manifest covers it. A client that holds \
                an older version of such a file fetches only the chunks it lacks. Publish DIR with \
                its .mirror-chunks folder; manifest create never lists that folder. With \
                --chunks-dir CDIR the indexes go to CDIR/PATH instead, outside the tree (for a \
                tree also copied with rsync); the manifest still names .mirror-chunks/PATH, so \
                serve CDIR at --base-url + .mirror-chunks/ (nginx: location \
                /lab/.mirror-chunks/ { alias CDIR/; }). Indexes are version 2 (compact, chunks of \
                about 20 KB); --chunks-format 1 writes the text index of 64 KiB chunks that clients \
                before version 2 read (docs/manifest.md, "Chunk indexes").

                With --serial N and --expires, the manifest also carries serial: N and expires: \
                TIME, which machines syncing it with --trust hold it to: a serial lower than the \
                highest they accepted, or a time past, is refused (docs/signing.md, "Versions"). \
                Raise the serial with every publish. A mirror older than 0.2 refuses these keys: \
                upgrade them before the publisher adds them.

                Exits 0 once the manifest is written, 64 for an unusable --base-url, 1 when DIR or \
                a file in it cannot be read (nothing is written then).

                Example: mirror manifest create /srv/www/lab --base-url https://media.example.org/lab/ \
                -o /srv/www/lab.yaml
                """
        )

        @Argument(help: ArgumentHelp("The folder to describe.", valueName: "DIR"))
        var directory: String

        @Option(name: .long, help: ArgumentHelp("Where DIR is published (http, https or file); a final / is added if missing.", valueName: "URL"))
        var baseURL: String

        @Option(name: [.short, .customLong("output")],
                help: ArgumentHelp("Write the manifest to FILE, replacing it atomically (default: standard output).", valueName: "FILE"))
        var output: String?

        @Option(name: .long, help: ArgumentHelp("Files hashed at once (default: one per core).", valueName: "N"))
        var jobs: Int?

        @Option(name: .long, help: ArgumentHelp(
            "Leave out files and folders matching GLOB (fnmatch): without a /, a name at any depth (.DS_Store, *.tmp); with a /, the path under DIR. Repeatable.",
            valueName: "GLOB"))
        var exclude: [String] = []

        @Flag(name: .long, help: "Write a chunk index for every file of at least --chunks-above bytes (under DIR/.mirror-chunks/), so clients with an older version fetch only what changed.")
        var chunks = false

        @Option(name: .long, help: ArgumentHelp("With --chunks: the smallest file that gets an index (64M, 1.5G). (default: 64M)", valueName: "SIZE"),
                transform: ByteCount.parse)
        var chunksAbove = ByteCount(bytes: 64 << 20)

        @Option(name: .long, help: ArgumentHelp("Write the chunk indexes to CDIR/PATH, outside DIR (implies --chunks); serve CDIR at --base-url + .mirror-chunks/, where clients ask for them.", valueName: "CDIR"))
        var chunksDir: String?

        @Option(name: .long, help: ArgumentHelp("With --chunks: the chunk index format, 2 (compact, smaller chunks) or 1 (text, for clients before version 2 indexes).", valueName: "N"))
        var chunksFormat = 2

        @Flag(name: .long, help: "List each file's modification time (mtime), which sync sets on every copy.")
        var mtime = false

        @Flag(name: .long, help: "List each file's permission bits (mode, such as \"0644\"), which sync sets on every copy; setuid, setgid and sticky bits are left out.")
        var mode = false

        @Flag(name: .long, help: "Both --mtime and --mode.")
        var preserve = false

        @Option(name: .long, help: ArgumentHelp("Write serial: N, a whole number raised with every publish; machines syncing with --trust refuse a lower one (docs/signing.md).", valueName: "N"))
        var serial: Int64?

        @Option(name: .long, help: ArgumentHelp("Write expires: the time (RFC 3339, 2027-01-31T00:00:00Z) or the time from now (30d, 12h) after which machines syncing with --trust refuse the manifest.", valueName: "TIME|DURATION"))
        var expires: String?

        @Option(name: .long, help: ArgumentHelp("Also write a Metalink 4 file of the same files to FILE (for aria2c, wget2 and other Metalink clients).", valueName: "FILE"))
        var metalink: String?

        @Flag(name: .long, help: "Print no summary line (notes of skipped files are still printed).")
        var quiet = false

        /// `--expires` as a time: RFC 3339, or a duration from now (whole seconds, UTC).
        static func expiry(_ text: String, now: Int64) throws -> FileTime {
            if case .success(let time) = RFC3339.parse(text) { return time }
            guard let span = try? TimeSpan(parsing: text), span.seconds > 0, span.seconds < 1e11 else {
                throw ValidationError("--expires must be an RFC 3339 time (2027-01-31T00:00:00Z) or a duration from now (30d, 12h), not \(text)")
            }
            return FileTime(seconds: now + Int64(span.seconds.rounded(.up)))
        }

        func validate() throws {
            guard ParseOrder.checksMeaning else { return }
            if let serial, serial < 0 { throw ValidationError("--serial must be a whole number ≥ 0") }
            if let expires { _ = try Self.expiry(expires, now: 0) }
            if let jobs, jobs < 1 || jobs > 256 { throw ValidationError("--jobs must be between 1 and 256") }
            if ChunkIndex.Format(rawValue: chunksFormat) == nil { throw ValidationError("--chunks-format must be 1 or 2") }
        }

        func run() throws {
            let report = ConsoleReport(mode: .text)
            // The output and its signature, as they are now (a rerun in place finds both).
            var excluded = ManifestExclusions(patterns: exclude)
            for path in (output.map({ [$0, $0 + ".sig"] }) ?? []) + (metalink.map { [$0] } ?? []) {
                var st = stat()
                if lstat(path, &st) == 0 { excluded.files.append((UInt64(st.st_dev), UInt64(st.st_ino))) }
            }
            let options = ManifestWriter.Options(mtime: mtime || preserve, mode: mode || preserve,
                                                 chunksAbove: chunks || chunksDir != nil ? chunksAbove.bytes : nil,
                                                 chunksFolder: chunksDir,
                                                 chunksFormat: ChunkIndex.Format(rawValue: chunksFormat) ?? .binary,
                                                 serial: serial,
                                                 expires: try expires.map { try Self.expiry($0, now: Int64(currentUnixTime())) })
            do {
                let result = try ManifestWriter.create(directory: directory, baseURL: baseURL, excluding: excluded,
                                                       threads: jobs ?? WorkerPool.coreCount, options: options)
                for skipped in result.skipped { report.fatal("skipped \(skipped.path): \(skipped.reason)") }
                for note in result.notes { report.warning("\(note.path): \(note.reason)") }
                if let metalink {
                    try ManifestWriter.writeAtomically(MetalinkWriter.render(baseURL: baseURL, files: result.files), to: metalink)
                }
                if let output {
                    try ManifestWriter.writeAtomically(result.yaml, to: output)
                } else {
                    try Self.writeToStandardOutput(result.yaml)
                }
                if !quiet { report.warning(Self.summary(result, output: output)) }
            } catch let error as ExitCoded {
                report.fatal(error.description)
                throw ExitCode(error.exitStatus)
            } catch let error as SystemError {
                // A file that cannot be read or written: the command's "cannot read" (1).
                report.fatal(error.description)
                throw ExitCode(ExitStatus.entriesFailed)
            }
        }

        /// `wrote lab.yaml: 7 files, 5.0 MiB (5242880 bytes), 1 chunk index`.
        static func summary(_ result: ManifestWriter.Result, output: String?) -> String {
            let files = result.files.count, indexes = result.chunkIndexes
            return "wrote \(output ?? "the manifest to standard output"): \(files) file\(files == 1 ? "" : "s"), "
                + "\(Formatting.bytes(result.bytes)) (\(result.bytes) bytes), \(indexes) chunk index\(indexes == 1 ? "" : "es")"
        }

        /// The manifest on standard output (``FileDescriptor/append(_:)``: `write(2)` until all is
        /// written), through a duplicate of descriptor 1, which the `FileDescriptor` closes.
        private static func writeToStandardOutput(_ text: String) throws {
            // A reader that went away (`| head`) is EPIPE here, not a silent death by SIGPIPE.
            signal(SIGPIPE, SIG_IGN)
            try FileDescriptor(fd: dup(1), displayPath: "standard output").append(Array(text.utf8))
        }
    }
}
