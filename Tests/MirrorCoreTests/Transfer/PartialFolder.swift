@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A temporary folder for partial files, open, with a journal in it: what the tests of
/// ``PartialFile`` and its writer thread start from.
struct PartialFolder {
    let dir: TemporaryDirectory
    let folder: FileDescriptor
    let journal: Journal

    init() throws {
        dir = try TemporaryDirectory()
        let fd = Glibc.open(dir.path, O_RDONLY | O_DIRECTORY)
        try #require(fd >= 0)
        folder = FileDescriptor(fd: fd, displayPath: dir.path)
        journal = try Journal(folder: folder, displayPath: "journal", readOnly: false)
    }
}
