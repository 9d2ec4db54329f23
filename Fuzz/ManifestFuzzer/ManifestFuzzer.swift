// Fuzz target "manifest": the manifest parser, from bytes (gzip, YAML, the rules of docs/manifest.md).
// Any input may be rejected with a ManifestError; none may crash, hang or exhaust memory (scripts/fuzz
// runs libFuzzer with -timeout and -rss_limit_mb), and what is accepted must keep the spec's promises.

func fuzzManifest(_ bytes: [UInt8]) {
    // The fast reader must build libyaml's very tree for every input it accepts (FastManifestScanner).
    if let fast = bytes.withUnsafeBufferPointer({ FastManifestScanner.tree(from: $0) }) {
        guard let reference = try? YAMLParser.parse(bytes, fastPath: false) else {
            fatalError("the fast reader accepted what libyaml refuses")
        }
        if fast != reference { fatalError("the fast reader and libyaml built different trees") }
    }
    guard let manifest = try? ManifestLoader.parse(bytes, sourceName: "fuzz.yaml") else { return }
    // What the loader promises downstream code (docs/manifest.md): checked, so a violation is a finding.
    var seen = Set<String>()
    for entry in manifest.entries {
        if entry.size < 0 { fatalError("negative size accepted: \(entry.size)") }
        if entry.path.isEmpty || entry.path.hasPrefix("/") { fatalError("unsafe path accepted: \(entry.path)") }
        if entry.path.split(separator: "/", omittingEmptySubsequences: false).contains(where: { $0 == ".." || $0 == "." || $0.isEmpty }) {
            fatalError("path with an empty, . or .. component accepted: \(entry.path)")
        }
        if !seen.insert(entry.path).inserted { fatalError("duplicate path accepted: \(entry.path)") }
    }
}
