import Testing
@testable import MirrorCore
@testable import MirrorFS

/// ``DeltaPolicy``: which sources and old copies a delta uses, and which failures stop the run.
struct DeltaPolicyTests {
    @Test func onlyHTTPSourcesServeADeltasRanges() {
        #expect(DeltaPolicy.servesRanges("https://media.example.org/a.img"))
        #expect(DeltaPolicy.servesRanges("HTTP://127.0.0.1:8080/a.img"))
        #expect(!DeltaPolicy.servesRanges("file:///srv/a.img"))
    }

    @Test func aFarLargerOldCopyIsNotChunked() {
        #expect(DeltaPolicy.isWorthChunking(oldSize: 300 << 20, newSize: 256 << 20))
        #expect(DeltaPolicy.isWorthChunking(oldSize: 64 << 20, newSize: 1))
        #expect(!DeltaPolicy.isWorthChunking(oldSize: 100 << 30, newSize: 1 << 20))
        #expect(DeltaPolicy.isWorthChunking(oldSize: 1 << 40, newSize: .max), "no overflow")
    }

    @Test func onlyAFullOrReadOnlyDestinationStopsTheRun() {
        #expect(DeltaPolicy.isDestinationFull(SystemError("preallocate", "p", code: ENOSPC)))
        #expect(DeltaPolicy.isDestinationFull(SystemError("copy into", "p", code: EROFS)))
        #expect(!DeltaPolicy.isDestinationFull(SystemError("read", "seed/a.img", code: EACCES)), "an expired NFS seed")
        #expect(!DeltaPolicy.isDestinationFull(SystemError("read", "seed/a.img", code: EIO)))
    }
}

#if canImport(Glibc)
import Glibc
#endif
