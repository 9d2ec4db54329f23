#if canImport(Glibc)
import Glibc
#endif

// The one libFuzzer entry point of the fuzz binary scripts/fuzz builds. Both targets share one
// binary (one compilation of MirrorCore, which takes most of the build time); the environment
// variable MIRROR_FUZZ_TARGET ("manifest", "response" or "chunks") chooses which one runs.

private enum Target { case manifest, response, chunks }

private let target: Target = {
    switch getenv("MIRROR_FUZZ_TARGET").map({ String(cString: $0) }) {
    case "manifest": return .manifest
    case "response": return .response
    case "chunks": return .chunks
    default:
        fputs("MIRROR_FUZZ_TARGET must be \"manifest\", \"response\" or \"chunks\"\n", stderr)
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
    }
    return 0
}
