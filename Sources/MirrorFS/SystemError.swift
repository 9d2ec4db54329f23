#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed system call on a named file: what was attempted, on which path, and `errno`.
///
/// The description reads as a sentence a person can act on, for example
/// `cannot write media/.mirror/journal: No space left on device`.
public struct SystemError: Error, CustomStringConvertible, Sendable, Equatable {
    public var operation: String
    public var path: String
    public var code: Int32
    /// What a person needs beyond the call's own words, after them (a full disk: which entry, the
    /// bytes it needs and the bytes free; ``DiskSpace``).
    public var detail: String?

    public init(_ operation: String, _ path: String, code: Int32 = errno, detail: String? = nil) {
        self.operation = operation
        self.path = path
        self.code = code
        self.detail = detail
    }

    /// `ENOSPC`, `EDQUOT`, `EROFS`, `EACCES`, `EPERM`: the destination itself refuses to be written,
    /// which the contract reports with exit code 73 rather than as one failed entry.
    public var isDestinationUnwritable: Bool {
        [ENOSPC, EDQUOT, EROFS, EACCES, EPERM].contains(code)
    }

    public var description: String {
        "cannot \(operation) \(path): \(String(cString: strerror(code)))" + (detail.map { "; " + $0 } ?? "")
    }
}

/// Runs a system call, retrying on `EINTR` (signals interrupting slow calls, POSIX.1-2008 §2.3).
@inline(__always)
package func retryingOnEINTR<T: BinaryInteger>(_ call: () -> T) -> T {
    while true {
        let r = call()
        if r == -1 && errno == EINTR { continue }
        return r
    }
}
