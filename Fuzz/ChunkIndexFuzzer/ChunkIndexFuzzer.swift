// Fuzz target "chunks": the chunk index reader (ChunkIndex.parse, docs/manifest.md "Chunk
// indexes") and the delta plan built from what it accepts. An index reaches the reader only after
// its SHA-256 matched the manifest's, but the reader must still never trap, and whatever it accepts
// must be an index the rest of the code can rely on: lengths within the parameters that add up to
// the size, an encoding in its own version that reads back the same, and a plan that covers the
// file exactly.
//
// Input: the bytes of an index file.

@testable import MirrorModel

func fuzzChunkIndex(_ bytes: [UInt8]) {
    guard let index = try? ChunkIndex.parse(bytes) else { return }
    var total: Int64 = 0
    for chunk in index.chunks {
        if chunk.length <= 0 || chunk.length > index.parameters.max { fatalError("chunk length \(chunk.length) accepted") }
        total += Int64(chunk.length)
    }
    if total != index.size { fatalError("chunks add up to \(total), size \(index.size)") }
    // Written again in its own version (the text of version 1, the records of version 2).
    let format: ChunkIndex.Format = bytes.starts(with: Array("mirror-chunks 2\n".utf8)) ? .binary : .text
    guard let again = try? ChunkIndex.parse(index.encoded(format)), again == index else {
        fatalError("the index does not read back the same in its own version")
    }
    // Every other chunk "found" in an old file, at made-up offsets.
    var found: [ChunkDigest: Int64] = [:]
    for (i, chunk) in index.chunks.enumerated() where i % 2 == 0 { found[chunk.digest] = Int64(i) * 7 }
    let plan = DeltaPlan(index: index, found: found, maxSegments: 5)
    var at: Int64 = 0
    for segment in plan.segments {
        if segment.start != at || segment.end <= segment.start { fatalError("segments do not tile the file: \(plan.segments)") }
        at = segment.end
    }
    if at != index.size || plan.segments.count > 5 { fatalError("plan covers \(at) of \(index.size) in \(plan.segments.count)") }
    if plan.remoteBytes + plan.localBytes != index.size { fatalError("copies and ranges do not add up") }
}
