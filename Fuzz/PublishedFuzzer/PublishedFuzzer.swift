// Fuzz target "published": the formats publishers ship (docs/manifest.md, "Checksum lists" and
// "Metalink 4"), which come from any mirror: the checksum list reader (ChecksumList.parse, and
// ClearSigned.text for a clearsigned one) and the Metalink reader (Metalink.parse, libxml2's
// streaming reader). Neither may trap, hang or blow up memory; what they accept must be what the
// rest of the code relies on: each path passes the manifest's path rules and appears once, sizes
// are within 2^62 and add up within it, every Metalink file has a digest and at least one URL.
//
// Input: the bytes of a list or a Metalink file (the reader is chosen by them, as a run does).

@testable import MirrorModel

func fuzzPublished(_ bytes: [UInt8]) {
    if Metalink.looksLike(bytes) {
        guard let link = try? Metalink.parse(bytes, sourceName: "fuzz.meta4") else { return }
        var seen = Set<String>()
        var total: Int64 = 0
        for file in link.files {
            check(file.path, &seen)
            if file.size < 0 || file.size > ManifestEntry.largestSize { fatalError("size \(file.size) accepted") }
            total += file.size
            if total > Manifest.largestTotal { fatalError("sizes add up to \(total)") }
            if file.digests.isEmpty || file.urls.isEmpty { fatalError("\(file.path): accepted with no digest or no URL") }
        }
        let manifest = link.manifest(sourceName: "fuzz.meta4")
        if manifest.entries.count != link.files.count { fatalError("entries lost") }
        return
    }
    let text = ClearSigned.isClearSigned(bytes) ? ClearSigned.text(of: bytes) : bytes
    guard let text, let list = try? ChecksumList.parse(text, sourceName: "SHA256SUMS") else { return }
    var seen = Set<String>()
    for file in list.files {
        check(file.path, &seen)
        if file.digest.bytes.count != list.algorithm.byteCount { fatalError("digest of \(file.digest.bytes.count) bytes accepted") }
        if let size = file.size, size < 0 || size > ManifestEntry.largestSize { fatalError("size \(size) accepted") }
    }
}

private func check(_ path: String, _ seen: inout Set<String>) {
    if ManifestRules.pathProblem(Array(path.utf8)[...]) != nil { fatalError("path \(path) breaks the rules and was accepted") }
    if !seen.insert(path).inserted { fatalError("path \(path) accepted twice") }
}
