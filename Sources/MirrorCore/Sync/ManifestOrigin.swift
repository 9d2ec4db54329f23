import MirrorModel

/// What a run knows of where its manifest came from, beyond its entries: set by ``SyncSession``,
/// which fetched or read it, and read by the run (``SyncRunner``).
public struct ManifestOrigin {
    /// Where the manifest came from (fetched, kept copy, local file), for the run's journal
    /// record (`status`).
    public var source: ManifestSource?
    /// SHA-256 of the manifest's bytes, asked for only when an atomic run needs it (a hold to
    /// check, a generation to record; ``HoldPolicy``).
    public var digest: () -> String? = { nil }
    /// Asks whether the manifest was republished during the run, after wrong bytes (``ManifestWatch``).
    var watch: ManifestWatch?

    public init() {}
}
