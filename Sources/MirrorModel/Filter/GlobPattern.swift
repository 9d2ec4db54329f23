/// One `--include` or `--exclude` pattern, matched against a manifest path's bytes as rsync
/// matches its filter patterns (docs/cli.md, "Choosing what a machine syncs"):
///
/// - `*` matches any run of characters but `/`; `**` any run at all, `/` included (`a/**/b` also
///   matches `a/b`); `?` one character but `/`; `[a-z]`, `[!0-9]` (or `[^0-9]`) one character of a
///   class; `\` makes the next character literal.
/// - A pattern with a `/` in it (but at its end) or a `**` is matched against the whole path;
///   otherwise against each name in it, so `*.iso` matches `images/win.iso`.
/// - A leading `/` anchors the pattern at DEST's top (`/tmp` is `tmp`, never `a/tmp`); without it,
///   a whole-path pattern may match from the start of any name (`b/c` matches `a/b/c`).
/// - A pattern that matches a folder matches every file under it (`courses/bio101` selects the
///   whole course); a trailing `/` makes it match folders only, and rsync's `dir/***` is `dir`.
///
/// Characters are UTF-8 scalars where the bytes are valid (`?` matches `é`, two bytes); a byte
/// that is not valid UTF-8 is a character of its own. The matcher is rsync's `wildmatch`, whose
/// two ways of giving up (no match from here at all; none until an outer `**`) bound its
/// backtracking to a polynomial whatever the pattern.
public struct GlobPattern: Sendable, Equatable {
    /// The pattern as given, for messages.
    public let text: String
    /// The pattern's bytes, without the leading `/`, the trailing `/` and a final `/***`.
    let body: [UInt8]
    let anchored: Bool
    let foldersOnly: Bool
    /// Matched against whole paths (it has a `/` or a `**`), not against names.
    let wholePath: Bool

    /// Why a pattern cannot be used.
    public enum Problem: Error, Equatable, Sendable {
        case empty
        case unclosedClass
        case trailingBackslash
    }

    public init(_ text: String) throws(Problem) {
        self.text = text
        var bytes = Array(text.utf8)
        anchored = bytes.first == UInt8(ascii: "/")
        if anchored { bytes.removeFirst() }
        if bytes.count >= 4, bytes.suffix(4).elementsEqual("/***".utf8) { bytes.removeLast(4) }
        foldersOnly = bytes.last == UInt8(ascii: "/")
        while bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
        guard !bytes.isEmpty else { throw .empty }
        try GlobPattern.check(bytes)
        body = bytes
        wholePath = bytes.contains(UInt8(ascii: "/")) || GlobPattern.hasDoubleStar(bytes)
    }

    private static func hasDoubleStar(_ bytes: [UInt8]) -> Bool {
        var i = 0
        while i + 1 < bytes.count {
            if bytes[i] == UInt8(ascii: "\\") { i += 2; continue }
            if bytes[i] == UInt8(ascii: "*") && bytes[i + 1] == UInt8(ascii: "*") { return true }
            i += 1
        }
        return false
    }

    /// Every `[` closed, no `\` at the end.
    private static func check(_ bytes: [UInt8]) throws(Problem) {
        var i = 0
        while i < bytes.count {
            switch bytes[i] {
            case UInt8(ascii: "\\"):
                guard i + 1 < bytes.count else { throw .trailingBackslash }
                i += 2
            case UInt8(ascii: "["):
                guard let end = GlobMatcher.classEnd(bytes, from: i) else { throw .unclosedClass }
                i = end + 1
            default:
                i += 1
            }
        }
    }

    /// Whether the pattern matches the file at `path`, or a folder it lies in.
    public func matches(_ path: UnsafeBufferPointer<UInt8>) -> Bool {
        body.withUnsafeBufferPointer { pattern in
            var end = path.count
            var isFolder = false
            // The file itself, then each folder above it, deepest first.
            while end > 0 {
                if !(foldersOnly && !isFolder), matches(pattern, UnsafeBufferPointer(rebasing: path[0 ..< end])) { return true }
                guard let slash = path[0 ..< end].lastIndex(of: UInt8(ascii: "/")) else { return false }
                end = slash
                isFolder = true
            }
            return false
        }
    }

    public func matches(_ path: [UInt8]) -> Bool { path.withUnsafeBufferPointer { matches($0) } }

    /// One candidate, a file's or a folder's whole path.
    private func matches(_ pattern: UnsafeBufferPointer<UInt8>, _ path: UnsafeBufferPointer<UInt8>) -> Bool {
        guard wholePath else {
            let name = path.lastIndex(of: UInt8(ascii: "/")).map { $0 + 1 } ?? 0
            return GlobMatcher.match(pattern, UnsafeBufferPointer(rebasing: path[name...]))
        }
        if GlobMatcher.match(pattern, path) { return true }
        guard !anchored else { return false }
        for (i, byte) in path.enumerated() where byte == UInt8(ascii: "/") {
            if GlobMatcher.match(pattern, UnsafeBufferPointer(rebasing: path[(i + 1)...])) { return true }
        }
        return false
    }
}
