#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CZlib
@testable import MirrorCore
@testable import MirrorKit

/// A fresh folder under /tmp for one test, removed (with its files) when the value goes away.
final class ManifestTempDir {
    let path: String
    private var files: [String] = []

    struct Failure: Error { var what: String }

    init() throws {
        var template = Array("/tmp/mirror-manifest-test-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure(what: "mkdtemp")
        }
        path = String(cString: made)
    }

    deinit {
        for file in files { unlink(file) }
        rmdir(path)
    }

    func write(_ bytes: [UInt8], to file: String) throws {
        files.append(file)
        let fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw Failure(what: "open \(file)") }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw Failure(what: "write \(file)") }
    }

    /// Writes `bytes` gzip-compressed with zlib's gzopen/gzwrite (a real gzip file, RFC 1952).
    func writeGzip(_ bytes: [UInt8], to file: String) throws {
        files.append(file)
        guard let gz = gzopen(file, "wb9") else { throw Failure(what: "gzopen \(file)") }
        let written = bytes.withUnsafeBytes { gzwrite(gz, $0.baseAddress, UInt32($0.count)) }
        guard gzclose(gz) == Z_OK, written == bytes.count else { throw Failure(what: "gzwrite \(file)") }
    }

    func read(_ file: String) throws -> [UInt8] {
        try WholeFile.read(file)
    }
}
