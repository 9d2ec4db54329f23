import ArgumentParser
import MirrorCore
import MirrorModel

/// The manifest and `--dest` shared by `status` and `verify`, resolved as `sync` resolves them.
struct ManifestAndDestination: ParsableArguments {
    @Argument(help: ArgumentHelp("The manifest (YAML, optionally gzip-compressed): a path, or the URL a sync fetched it from (then --dest is required and the copy kept in DIR/.mirror/manifest is read, without the network).", valueName: "manifest"))
    var manifest: String

    @Option(name: .long, help: ArgumentHelp("Destination folder; overrides the manifest's `destination`.", valueName: "DIR"))
    var dest: String?

    @OptionGroup var selection: SelectionOptions

    func validate() throws {
        guard ParseOrder.checksMeaning else { return }
        if RemoteManifest.isURL(manifest) && dest == nil {
            throw ValidationError("a manifest URL needs --dest DIR: the last good copy of the manifest is read from DIR/.mirror/manifest")
        }
    }

    /// ``load()``, then the entries `--include`/`--exclude`/`--filter-from` select, with how
    /// many they left out (a rule that matches no entry is a warning, as for `sync`).
    ///
    /// Without any of those options, the rules the last sync of DEST recorded (``RememberedSelection``),
    /// said on standard error: the files it left out are not missing.
    func loadSelected() throws -> (manifest: Manifest, destination: String, provenance: ManifestProvenance?, excluded: Int) {
        var filter = try selection.filterOrExit()
        let (manifest, destination, provenance) = try load()
        if filter == nil, let last = LastSelection.of(destination: destination) {
            filter = last
            ConsoleReport(mode: .text).warning("the selection of the last sync: \(LastSelection.options(last)) "
                                               + "(give --include '**' for every entry)")
        }
        guard let filter else { return (manifest, destination, provenance, 0) }
        let (selected, excluded) = SyncSession.select(manifest, filter, report: ConsoleReport(mode: .text))
        return (selected, destination, provenance, excluded)
    }

    /// Loads the manifest (for a URL: the copy a sync kept, never the network) and finds DEST, or
    /// exits 65 (invalid manifest, no kept copy) or 64 (no destination) with the message on
    /// standard error. Also returns where the manifest came from, for `status`.
    func load() throws -> (Manifest, String, ManifestProvenance?) {
        do {
            if RemoteManifest.isURL(manifest), let dest {
                let kept = try RemoteManifest.keptCopy(url: manifest, destination: dest)
                return (kept.manifest, dest, kept.provenance)
            }
            let loaded = try SyncSession.readLocalManifest(manifest)
            var options = SyncOptions(manifestPath: manifest)
            options.destination = dest
            return (loaded, try SyncRunner.destinationPath(manifest: loaded, options: options), ManifestProvenance.ofFile(manifest))
        } catch let error as ExitCoded {
            ConsoleReport(mode: .text).fatal(error.description)
            throw ExitCode(error.exitStatus)
        }
    }
}
