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
            65 invalid manifest; 66 manifest file cannot be read; 73 destination not writable; \
            75 try again later \
            (locked, deadline passed, or no source reachable).
            """,
        version: BuildInfo.versionLine,
        subcommands: [Sync.self, Status.self, Verify.self, RollbackCommand.self, ManifestGroup.self]
    )

    /// As ArgumentParser's own `main()`, except that a failed parse reports the first mistake in
    /// the words (an unknown option or command, with "did you mean") before any message of a
    /// `validate()`, which the typo may have caused (``ParseOrder``).
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        var command: ParsableCommand
        do {
            command = try parseAsRoot(arguments)
        } catch {
            exit(withError: ParseOrder.firstError(of: arguments, after: error))
        }
        do {
            try command.run()
        } catch {
            exit(withError: error)
        }
    }
}
