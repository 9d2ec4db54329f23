#if canImport(Glibc)
import Glibc
#endif

/// A path made absolute against the current folder (`getcwd`), for what is handed to another
/// program or written into a URL: gpgv takes a keyring name without a slash as one in its home
/// folder, and a `file:` URL has no current folder.
package enum CurrentFolder {
    /// `path` itself when it starts with `/`; nil when the current folder cannot be told.
    package static func absolute(_ path: String) -> String? {
        guard !path.hasPrefix("/") else { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/" + path
    }
}
