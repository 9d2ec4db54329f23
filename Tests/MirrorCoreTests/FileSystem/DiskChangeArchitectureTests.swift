import Foundation
import Testing

/// Every call that changes DEST, its store or its state goes through `DiskChange` (MirrorFS), so
/// that the crash-state tests see all of them (docs/journal.md, "Power loss, as the tests model
/// it"). This reads `Sources/` and fails on a mutating system call made anywhere else: a new one
/// must go through the layer, or be named below as outside the model, with the reason.
@Suite struct DiskChangeArchitectureTests {
    /// Calls that change a file system. `open`, `openat` and `openat2` count only when they open to
    /// write (see ``opensToWrite(_:)``); the rest always count.
    static let mutating = [
        "open", "openat", "creat", "mirror_openat2_beneath", "write", "writev", "pwrite", "pwritev", "ftruncate", "truncate",
        "fallocate", "posix_fallocate", "unlink", "unlinkat", "rename", "renameat", "renameat2", "link", "linkat",
        "symlink", "symlinkat", "mkdir", "mkdirat", "rmdir", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range",
        "copy_file_range", "fchmod", "chmod", "fchmodat", "futimens", "utimensat", "ioctl", "mirror_syncfs", "mirror_reserve",
        "mirror_start_writeback", "mirror_rename_noreplace", "mirror_rename_exchange", "mirror_link_open_file",
        "mirror_copy_file_range",
    ]

    /// The layer itself.
    static let layer: Set<String> = ["MirrorFS/DiskChange.swift", "MirrorFS/DiskTrace.swift"]

    /// Writing that is not DEST's, and so outside the crash model: file, calls, why.
    static let outside: [String: (calls: Set<String>, why: String)] = [
        "MirrorModel/Signature/ManifestTrust.swift": (["open", "rename", "unlink"], "`manifest sign` writes its signature beside the publisher's manifest"),
        "MirrorModel/Manifest/ManifestWriter+Attributes.swift": (["mkdir"], "`manifest create` makes its chunk index folder on the publisher"),
        "MirrorCore/Report/RunLog.swift": (["open", "fchmod", "write"], "`--log-file`, a file the operator names"),
        "MirrorCore/Report/ProgressDisplay.swift": (["ioctl"], "TIOCGWINSZ reads the terminal's width"),
        "MirrorFS/ScratchFolder.swift": (["openat", "mkdirat", "unlinkat", "rmdir"],
                                  "`Scratch`: gpgv's private folder under TMPDIR (the list and signature it checks, its home), never DEST's"),
    ]

    @Test func mutatingCallsGoThroughDiskChange() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Sources")
        let found = try Self.rawCalls(under: sources)
        #expect(found.count > 0 || !Self.outside.isEmpty)
        var problems: [String] = []
        for (file, line, call, text) in found {
            if Self.layer.contains(file) { continue }
            if let allowed = Self.outside[file], allowed.calls.contains(call) { continue }
            problems.append("Sources/\(file):\(line): \(call)( outside DiskChange: \(text)")
        }
        let listed = problems.joined(separator: "\n")
        #expect(problems.isEmpty, "a call that changes the disk must go through MirrorFS's DiskChange (or be named in DiskChangeArchitectureTests.outside, with why it is not DEST's):\n\(listed)")
        // The check finds what it looks for: the layer's own calls are seen.
        #expect(found.contains { Self.layer.contains($0.file) && $0.call == "renameat" })
    }

    /// The check itself, on text: a raw call is found, a method, a label or a read-only open is not.
    @Test func theCheckTellsACallFromAMethod() {
        #expect(Self.calls(in: "if unlinkat(folder.fd, name, 0) != 0 {").map(\.call) == ["unlinkat"])
        #expect(Self.calls(in: "let n = Glibc.write(fd, base, remaining)").map(\.call) == ["write"])
        #expect(Self.calls(in: "if DiskChange.unlinkat(folder.fd, name, 0) != 0 {").isEmpty)
        #expect(Self.calls(in: "try file.write(buffer, at: 0)").isEmpty)
        #expect(Self.calls(in: "_ = try link(path, from: current)").isEmpty)
        #expect(Self.calls(in: "let fd = openat(folder.fd, name, O_RDONLY | O_NOFOLLOW)").isEmpty)
        #expect(Self.calls(in: "let fd = openat(folder.fd, name, O_RDWR | O_CREAT, 0o600)").map(\.call) == ["openat"])
        #expect(Self.calls(in: "// unlinkat(2) removes a link").isEmpty)
    }

    static func rawCalls(under root: URL) throws -> [(file: String, line: Int, call: String, text: String)] {
        var out: [(String, Int, String, String)] = []
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else { return [] }
        for case let url as URL in walker where url.pathExtension == "swift" {
            let relative = String(url.path.dropFirst(root.path.count + 1))
            let text = try String(contentsOf: url, encoding: .utf8)
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                for found in calls(in: String(line)) { out.append((relative, index + 1, found.call, found.text)) }
            }
        }
        return out
    }

    /// The raw calls on one line of Swift: the name not after `.` or a word character (or after
    /// `Glibc.`), then `(`, arguments without labels (a label makes it a Swift method), not in a
    /// comment and not a declaration.
    static func calls(in line: String) -> [(call: String, text: String)] {
        var code = line
        if let comment = code.range(of: "//") { code = String(code[..<comment.lowerBound]) }
        let trimmed = code.trimmingCharacters(in: .whitespaces)
        if trimmed.isEmpty || trimmed.hasPrefix("func ") || code.contains(" func ") { return [] }
        let names = mutating.joined(separator: "|")
        guard let regex = try? NSRegularExpression(pattern: "(?:^|[^\\w.]|Glibc\\.)(\(names))\\(") else { return [] }
        var out: [(String, String)] = []
        let ns = code as NSString
        for match in regex.matches(in: code, range: NSRange(location: 0, length: ns.length)) {
            let name = ns.substring(with: match.range(at: 1))
            let after = ns.substring(from: match.range.location + match.range.length)
            let arguments = Self.arguments(after)
            if arguments.range(of: "^\\s*\\w+:|,\\s*\\w+:", options: .regularExpression) != nil { continue }
            if ["open", "openat", "mirror_openat2_beneath"].contains(name) && !opensToWrite(arguments) { continue }
            if name == "mirror_openat2_beneath" && code.contains("DiskChange.opening") { continue }
            out.append((name, trimmed))
        }
        return out
    }

    /// The text up to the `)` that closes the call (or the end of the line).
    static func arguments(_ text: String) -> String {
        var depth = 0
        var out = ""
        for c in text {
            if c == "(" { depth += 1 }
            if c == ")" { if depth == 0 { break }; depth -= 1 }
            out.append(c)
        }
        return out
    }

    /// An open to write: flags that write, or flags in a variable that may.
    static func opensToWrite(_ arguments: String) -> Bool {
        if ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "tmpfile"].contains(where: { arguments.contains($0) }) { return true }
        return !arguments.contains("O_RDONLY") && !arguments.contains("O_PATH") && arguments.contains(",")
    }
}
