import ArgumentParser

/// `mirror manifest …`: commands that work on manifest files rather than on a destination.
struct ManifestGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "manifest",
        abstract: "Work with manifest files.",
        subcommands: [ManifestSign.self]
    )
}
