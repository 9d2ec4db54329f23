// Fuzz target "manifest": the manifest parser, from bytes (gzip, YAML, the rules of docs/manifest.md).
// Any input may be rejected with a ManifestError; none may crash, hang or exhaust memory (scripts/fuzz
// runs libFuzzer with -timeout and -rss_limit_mb), and what is accepted must keep the spec's promises.

@testable import MirrorModel
@testable import MirrorState

func fuzzManifest(_ bytes: [UInt8]) {
    // The fast reader must build libyaml's very tree for every input it accepts (FastManifestScanner).
    if let fast = bytes.withUnsafeBufferPointer({ FastManifestScanner.tree(from: $0) }) {
        guard let reference = try? YAMLParser.parse(bytes, fastPath: false) else {
            fatalError("the fast reader accepted what libyaml refuses")
        }
        if fast != reference { fatalError("the fast reader and libyaml built different trees") }
    }
    // Entries built while reading (ManifestEntryStream) must be what the whole tree gives, and so
    // must the first error (line, column, message), with libyaml alone and with the fast reader.
    let whole = load(bytes, ManifestLoader.Reader(fastPath: false, streaming: false))
    let events = load(bytes, ManifestLoader.Reader(fastPath: false, streaming: true))
    let production = load(bytes, ManifestLoader.Reader())
    // Paths checked without the table while they come sorted must give the table's verdict and message.
    var tableOnly = ManifestLoader.Reader()
    tableOnly.sortedPaths = false
    if !same(load(bytes, tableOnly), production) { fatalError("the sorted-path check and the path table disagree") }
    if !same(events, whole) { fatalError("the streamed libyaml reader and the whole tree disagree: \(events) vs \(whole)") }
    if !same(production, whole) { fatalError("the loader and the whole tree disagree: \(production) vs \(whole)") }
    guard case .success(let manifest) = production else { return }
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
    // What the space check and the plan do with the sizes (at most 2^62 in all, docs/manifest.md):
    // a sum that could pass Int64.max would trap here, as it once trapped every sync.
    let files = manifest.entries.map { SpaceCheck.File(size: $0.size, allocated: 0) }
    for blockSize: Int64 in [1, 512, 4096, 1 << 20] where SpaceCheck(blockSize: blockSize).needed(files) < 0 {
        fatalError("negative space needed for a block of \(blockSize)")
    }
    if manifest.entries.clampedSum(\.size) > Manifest.largestTotal { fatalError("sizes past 2^62 accepted") }
    // serial and expires against the extremes of what a DEST may have accepted: a verdict, never a trap.
    let digest = String(repeating: "0", count: 64)
    for accepted in [nil, AcceptedManifest(serial: 0, sha256: digest, expires: nil),
                     AcceptedManifest(serial: Int64.max, sha256: digest, expires: Int64.min)] {
        for now in [Int64.min, 0, Int64.max] {
            _ = SerialPolicy(serial: manifest.serial, sha256: digest, expires: manifest.expires, now: now).judge(after: accepted)
        }
    }
}

private func load(_ bytes: [UInt8], _ reader: ManifestLoader.Reader) -> Result<Manifest, ManifestError> {
    var text = bytes
    do {
        return .success(try ManifestLoader.manifest(from: &text, sourceName: "fuzz.yaml", reader: reader))
    } catch let error as ManifestError {
        return .failure(error)
    } catch {
        fatalError("the loader threw something other than a ManifestError: \(error)")
    }
}

private func same(_ a: Result<Manifest, ManifestError>, _ b: Result<Manifest, ManifestError>) -> Bool {
    switch (a, b) {
    case (.success(let x), .success(let y)):
        return x.baseURL == y.baseURL && x.mirrors == y.mirrors && x.destination == y.destination && x.entries == y.entries
            && x.serial == y.serial && x.expires == y.expires
    case (.failure(let x), .failure(let y)):
        return x == y
    default:
        return false
    }
}
