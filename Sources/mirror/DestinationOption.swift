import ArgumentParser
import MirrorCore

/// The manifest and `--dest` shared by `status` and `verify`, resolved as `sync` resolves them.
struct ManifestAndDestination: ParsableArguments {
    @Argument(help: ArgumentHelp("The manifest (YAML, optionally gzip-compressed).", valueName: "manifest"))
    var manifest: String

    @Option(name: .long, help: ArgumentHelp("Destination folder; overrides the manifest's `destination`.", valueName: "DIR"))
    var dest: String?

    /// Loads the manifest and finds DEST, or exits 65 (invalid manifest) or 64 (no destination)
    /// with the message on standard error.
    func load() throws -> (Manifest, String) {
        do {
            let loaded = try ManifestLoader.load(path: manifest)
            var options = SyncOptions(manifestPath: manifest)
            options.destination = dest
            return (loaded, try SyncRunner.destinationPath(manifest: loaded, options: options))
        } catch let error as ExitCoded {
            ConsoleReport(mode: .text).fatal(error.description)
            throw ExitCode(error.exitStatus)
        }
    }
}
