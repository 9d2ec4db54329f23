#if canImport(Glibc)
import Glibc
#endif

// The one libFuzzer entry point of the fuzz binary scripts/fuzz builds. The targets share one
// binary (one compilation of MirrorCore, which takes most of the build time); the environment
// variable MIRROR_FUZZ_TARGET ("manifest", "response", "chunks" or "published") chooses which one runs.

private enum Target { case manifest, response, chunks, published }

private let target: Target = {
    switch getenv("MIRROR_FUZZ_TARGET").map({ String(cString: $0) }) {
    case "manifest": return .manifest
    case "response": return .response
    case "chunks": return .chunks
    case "published": return .published
    default:
        fputs("MIRROR_FUZZ_TARGET must be \"manifest\", \"response\", \"chunks\" or \"published\"\n", stderr)
        exit(2)
    }
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    switch target {
    case .manifest: fuzzManifest(bytes)
    case .response: fuzzResponse(bytes)
    case .chunks: fuzzChunkIndex(bytes)
    case .published: fuzzPublished(bytes)
    }
    return 0
}
