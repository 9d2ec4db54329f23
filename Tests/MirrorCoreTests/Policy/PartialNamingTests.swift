import Testing
@testable import MirrorCore

/// ``PartialNaming``: which downloads go without a name until verified.
struct PartialNamingTests {
    let naming = PartialNaming(canLinkOpenFiles: true)

    @Test func onlySmallNewDownloadsGoWithoutAName() {
        #expect(naming.unnamed(size: 0, resuming: false))
        #expect(naming.unnamed(size: 16 << 10, resuming: false))
        #expect(naming.unnamed(size: PartialNaming.limit, resuming: false))
        #expect(!naming.unnamed(size: PartialNaming.limit + 1, resuming: false), "a kill would lose more than the limit")
        #expect(!naming.unnamed(size: 16 << 10, resuming: true), "bytes of an earlier run are in a named file")
    }

    @Test func withoutProcEveryDownloadIsNamed() {
        #expect(!PartialNaming(canLinkOpenFiles: false).unnamed(size: 1, resuming: false))
    }
}
