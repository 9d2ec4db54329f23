import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
import MirrorCore
import MirrorFS

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what the journal and the disk say about each file, without network or hashing.",
        discussion: """
            Reads DEST/.mirror/journal and looks at each manifest path with one stat. Every entry is \
            done (verified by a sync and untouched since), partial (with the percentage downloaded), \
            failed (with the last error), unverified (a file is there that no sync has verified), \
            blocked (a folder or link is in the way) or missing. Also shows the last run and whether \
            a sync is running now, the last run that ended ok, and the manifest read (its digest, \
            ETag and since when it is known current).

            MANIFEST may be the URL a sync fetched it from (with --dest): the copy that sync kept \
            in DEST/.mirror/manifest is read, so status answers while the server is down.

            Safe beside a running sync: it takes no lock and writes nothing, not even DEST/.mirror. \
            To check the bytes themselves, use `mirror verify`. Exits 0 whatever the state of the \
            files; 65 for an invalid manifest (or, for a URL, no usable kept copy), 66 for a manifest file that cannot \
            be read, 64 when no destination is known, 1 when DEST or \
            its journal cannot be read, or standard output cannot be written.
            """
    )

    @OptionGroup var target: ManifestAndDestination

    @Flag(name: .long, help: "Print one JSON object on standard output instead of the text report.")
    var json = false

    func run() throws {
        // DEST is read while the manifest is parsed when --dest names it.
        let disk = target.dest.map { StatusDisk(destinationPath: $0) }
        let (manifest, destination, provenance, excluded) = try target.loadSelected()
        do {
            var status = try StatusInspector.inspect(manifest: manifest, destinationPath: destination, disk: disk)
            status.manifest = provenance
            status.excluded = excluded
            // A line or a batch at a time through stdio's buffer: 10^6 missing files are not
            // one string first.
            // The first failure's errno, before anything else can overwrite it.
            var failure: Int32 = 0
            let write: (String) -> Void = { if fputs($0, StandardStreams.output) < 0, failure == 0 { failure = errno } }
            if json { status.writeJSON(to: write) } else { status.writeText(to: write) }
            if fflush(StandardStreams.output) != 0, failure == 0 { failure = errno }
            if failure == 0, ferror(StandardStreams.output) != 0 { failure = EIO }
            if failure != 0 {
                ConsoleReport(mode: .text).fatal("cannot write standard output: \(String(cString: strerror(failure)))")
                throw ExitCode(ExitStatus.entriesFailed)
            }
        } catch let error as SystemError {
            ConsoleReport(mode: .text).fatal(error.description)
            throw ExitCode(ExitStatus.entriesFailed)
        }
    }
}
