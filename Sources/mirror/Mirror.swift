import ArgumentParser
import MirrorCore

#if canImport(Glibc)
import Glibc
#endif

/// The `mirror` command. This target only parses arguments and maps results to exit codes
/// (docs/cli.md); everything else lives in MirrorCore.
@main
struct Mirror: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mirror",
        abstract: "Keep a directory in sync with a checksummed manifest, over connections that fail.",
        discussion: """
            Every file is resumed where an earlier run stopped, verified against the manifest's \
            checksum, and renamed into place only once verified.

            Exit codes: 0 all files verified; 1 some entries failed; 64 usage error; \
            65 invalid manifest; 73 destination not writable; 75 try again later \
            (locked, deadline passed, or no source reachable).
            """,
        version: "0.1.0",
        subcommands: [Sync.self, Status.self, Verify.self, ManifestGroup.self]
    )
}
