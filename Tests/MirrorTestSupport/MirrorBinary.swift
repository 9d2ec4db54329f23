#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Finds the `mirror` executable the integration tests run.
///
/// Integration tests exercise the real binary (argument parsing, exit codes, signals, memory) rather
/// than calling `MirrorCore`, so they need its path. `swift test` puts the test bundle and the
/// package's executables in the same build folder, which is why the default is "next to the running
/// test executable"; `MIRROR_BIN` overrides it, e.g. to test a release build or an installed copy.
public enum MirrorBinary {
    public static func path() throws -> String {
        let candidate: String
        if let override = ProcessInfo.processInfo.environment["MIRROR_BIN"], !override.isEmpty {
            candidate = override
        } else {
            guard let resolved = realpath("/proc/self/exe", nil) else {
                throw HarnessError.posix("realpath(/proc/self/exe) to find the build folder")
            }
            let exe = String(cString: resolved)
            free(resolved)
            // Under `swift test` this is e.g. .build/<triple>/debug/mirrorPackageTests.xctest.
            let folder = (exe as NSString).deletingLastPathComponent
            candidate = folder + "/mirror"
        }
        var info = stat()
        guard stat(candidate, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, access(candidate, X_OK) == 0 else {
            throw HarnessError("mirror executable not found or not executable at \(candidate): build it with `swift build` "
                + "(or set MIRROR_BIN to its path)")
        }
        return candidate
    }
}
