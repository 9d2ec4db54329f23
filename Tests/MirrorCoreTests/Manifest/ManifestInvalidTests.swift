@testable import MirrorModel
import Testing
@testable import MirrorCore

/// One manifest that breaks one rule, and where and how the error must say so.
struct InvalidManifest: Sendable, CustomTestStringConvertible {
    var name: String
    var yaml: String
    var line: Int
    var column: Int
    var message: String

    var testDescription: String { name }

    init(_ name: String, _ yaml: String, _ line: Int, _ column: Int, _ message: String) {
        self.name = name
        self.yaml = yaml
        self.line = line
        self.column = column
        self.message = message
    }
}

private typealias F = ManifestFixture
private let sha = ManifestFixture.sha256

/// Positions were worked out by hand from the text: 1-based, pointing at the offending node (for
/// `oneEntry`, the entry's mapping is at 4:5, `path`'s value at 4:11, `size`'s at 5:11, `sha256`'s
/// at 6:13, and extra lines start at line 7).
let invalidManifests: [InvalidManifest] = [
    // YAML level
    InvalidManifest("syntax error", F.yaml("version: 1", "base_url: https://x/: y", "files: []"),
                    2, 21, "YAML syntax error: mapping values are not allowed"),
    InvalidManifest("unclosed flow sequence", F.yaml("version: 1", "files: [", "other: 1"),
                    4, 1, "YAML syntax error: did not find expected ',' or ']'"),
    InvalidManifest("empty file", "", 1, 1, "manifest is empty: expected a mapping with version and files"),
    InvalidManifest("only comments", F.yaml("# nothing here", ""), 1, 1, "manifest is empty"),
    InvalidManifest("multiple documents", F.yaml("version: 1", "files: []", "---", "version: 1", "files: []"),
                    3, 1, "exactly one YAML document"),
    InvalidManifest("top level is a list", F.yaml("- version: 1"), 1, 1,
                    "a manifest must be a mapping with version and files, got a list"),
    InvalidManifest("duplicate top-level key", F.yaml("version: 1", "files: []", "version: 1"),
                    3, 1, "duplicate key \"version\" (first on line 1)"),
    InvalidManifest("duplicate entry key", F.oneEntry("    size: 2"),
                    7, 5, "duplicate key \"size\" (first on line 5)"),
    InvalidManifest("alias bomb (billion laughs)", F.yaml(
        "version: 1",
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]",
        "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]",
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]",
        "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]",
        "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]",
        "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]",
        "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]",
        "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]",
        "i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]",
        "files: *i"),
                    7, 8, "aliases expand beyond 100000 nodes (alias bomb?)"),
    InvalidManifest("alias to its own anchor", F.yaml("version: 1", "files: &x [*x]"),
                    2, 12, "unknown anchor \"x\""),
    InvalidManifest("unknown anchor", F.yaml("version: 1", "files: *nope"), 2, 8, "unknown anchor \"nope\""),
    InvalidManifest("list as a mapping key", F.yaml("version: 1", "files: []", "? [a]", ": 1"),
                    3, 3, "mapping keys must be plain strings, got a list"),
    InvalidManifest("nesting too deep", F.yaml("version: 1",
                                               "files: " + String(repeating: "[", count: 300) + String(repeating: "]", count: 300)),
                    2, 263, "lists and mappings nest deeper than 256 levels"),
    InvalidManifest("application tag", F.oneEntry(path: "!foo a"), 4, 11, "unsupported YAML tag \"!foo\""),

    // Top level
    InvalidManifest("unknown top-level key", F.yaml("version: 1", "base-url: https://x/", "files: []"),
                    2, 1, "unknown key \"base-url\"; allowed keys: version, serial, expires, base_url, mirrors, destination, files"),
    InvalidManifest("merge key is an unknown key", F.yaml("version: 1", "<<: {files: []}", "files: []"),
                    2, 1, "unknown key \"<<\""),
    InvalidManifest("wrong version", F.yaml("version: 2", "files: []", "future_key: 1"),
                    1, 10, "unsupported manifest version 2: this mirror reads version 1"),
    InvalidManifest("quoted version", F.yaml("version: \"1\"", "files: []"),
                    1, 10, "version must be a whole number (this mirror reads version 1), got the string \"1\""),
    InvalidManifest("fractional version", F.yaml("version: 1.0", "files: []"), 1, 10, "got \"1.0\""),
    InvalidManifest("missing version", F.yaml("files: []"), 1, 1, "missing key \"version\""),
    InvalidManifest("missing files", F.yaml("# a comment", "version: 1"), 2, 1, "missing key \"files\""),
    InvalidManifest("files not a list", F.yaml("version: 1", "files: a"), 2, 8,
                    "files must be a list of entries, got \"a\""),
    InvalidManifest("files null", F.yaml("version: 1", "files:"), 2, 7,
                    "files must be a list of entries (write \"files: []\" for none), got null"),
    InvalidManifest("base_url not ending in /", F.yaml("version: 1", "base_url: https://example.org/lab", "files: []"),
                    2, 11, "base_url \"https://example.org/lab\" must end with \"/\""),
    InvalidManifest("base_url relative", F.yaml("version: 1", "base_url: lab/", "files: []"),
                    2, 11, "base_url must be an absolute URL"),
    InvalidManifest("base_url without host", F.yaml("version: 1", "base_url: \"https:///lab/\"", "files: []"),
                    2, 11, "has no host"),
    InvalidManifest("mirror with ftp scheme", F.yaml("version: 1", "mirrors:", "  - https://a.example/",
                                                     "  - ftp://b.example/", "files: []"),
                    4, 5, "mirror \"ftp://b.example/\" uses the scheme \"ftp\"; allowed schemes: https, http, file"),
    InvalidManifest("mirrors not a list", F.yaml("version: 1", "mirrors: https://a.example/", "files: []"),
                    2, 10, "mirrors must be a list of base URLs"),
    InvalidManifest("empty destination", F.yaml("version: 1", "destination: \"\"", "files: []"),
                    2, 14, "destination must not be empty"),

    // Entries
    InvalidManifest("entry not a mapping", F.yaml("version: 1", "files:", "  - a"), 3, 5,
                    "each entry of files must be a mapping with path, size and sha256, got \"a\""),
    InvalidManifest("unknown entry key (sha265)", F.oneEntry("    sha265: \(sha)"), 7, 5,
                    "unknown key \"sha265\" in an entry; allowed keys: path, url, size, sha256, sha512, mtime, mode, chunks (did you mean \"sha256\"?)"),
    InvalidManifest("missing path", F.yaml("version: 1", "base_url: https://x/", "files:",
                                           "  - size: 1", "    sha256: \(sha)"),
                    4, 5, "entry has no path"),
    InvalidManifest("missing size", F.yaml("version: 1", "base_url: https://x/", "files:",
                                           "  - path: a", "    sha256: \(sha)"),
                    4, 5, "entry \"a\" has no size"),
    InvalidManifest("missing sha256", F.yaml("version: 1", "base_url: https://x/", "files:",
                                             "  - {path: a, size: 1}"),
                    4, 5, "entry \"a\" has no sha256"),

    // path
    InvalidManifest("path with ..", F.oneEntry(path: "../x"), 4, 11, "path \"../x\" has a \"..\" component"),
    InvalidManifest("absolute path", F.oneEntry(path: "/etc/passwd"), 4, 11, "path \"/etc/passwd\" is absolute"),
    InvalidManifest("empty path", F.oneEntry(path: "\"\""), 4, 11, "path must not be empty"),
    InvalidManifest("null path", F.oneEntry(path: ""), 4, 10, "path must be a string (a relative path), got null"),
    InvalidManifest("a//b", F.oneEntry(path: "a//b"), 4, 11, "path \"a//b\" has an empty component"),
    InvalidManifest("trailing slash", F.oneEntry(path: "a/"), 4, 11, "path \"a/\" has an empty component"),
    InvalidManifest(". component", F.oneEntry(path: "a/./b"), 4, 11, "path \"a/./b\" has a \".\" component"),
    InvalidManifest("backslash", F.oneEntry(path: "'a\\b'"), 4, 11, "contains a backslash"),
    InvalidManifest("tab in path", F.oneEntry(path: "\"a\\tb\""), 4, 11,
                    "path \"a\\tb\" contains the control character U+0009"),
    InvalidManifest("NUL in path", F.oneEntry(path: "\"a\\0b\""), 4, 11, "contains the control character U+0000"),
    InvalidManifest("C1 control in path", F.oneEntry(path: "\"a\\x85b\""), 4, 11,
                    "contains the control character U+0085"),
    InvalidManifest(".mirror/x", F.oneEntry(path: ".mirror/x"), 4, 11,
                    "path \".mirror/x\" is inside \".mirror\", the folder where mirror keeps its own state"),
    InvalidManifest(".mirror itself", F.oneEntry(path: ".mirror"), 4, 11, "is inside \".mirror\""),
    InvalidManifest(".MIRROR/x", F.oneEntry(path: ".MIRROR/x"), 4, 11,
                    "path \".MIRROR/x\" is inside \".MIRROR\", which is \".mirror\" (the folder where mirror keeps its own state) on a case-insensitive file system"),
    InvalidManifest(".Mirror itself", F.oneEntry(path: ".Mirror"), 4, 11, "is inside \".Mirror\", which is \".mirror\""),
    InvalidManifest(".mIrRoR quoted", F.oneEntry(path: "\".mIrRoR/a/b\""), 4, 11, "is inside \".mIrRoR\""),
    InvalidManifest("duplicate path", F.oneEntry("  - path: a", "    size: 2", "    sha256: \(sha)"),
                    7, 11, "duplicate path \"a\": first listed on line 4"),
    InvalidManifest("file then a file inside it", F.oneEntry("  - path: a/b", "    size: 2", "    sha256: \(sha)"),
                    7, 11, "path \"a/b\" (line 7) is inside \"a\", which is listed as a file on line 4"),
    InvalidManifest("file then its folder", F.oneEntry(path: "a/b", "  - path: a", "    size: 2", "    sha256: \(sha)"),
                    7, 11, "path \"a\" (line 7) is a folder of \"a/b\" (line 4)"),
    InvalidManifest("deep folder clash", F.oneEntry(path: "x/y/z", "  - path: x/y/w", "    size: 2",
                                                    "    sha256: \(sha)", "  - path: x", "    size: 3",
                                                    "    sha256: \(sha)"),
                    10, 11, "path \"x\" (line 10) is a folder of \"x/y/z\" (line 4)"),

    // size
    InvalidManifest("negative size", F.oneEntry(size: "-5"), 5, 11,
                    "size must be a whole number of bytes ≥ 0, got \"-5\""),
    InvalidManifest("quoted size", F.oneEntry(size: "\"5\""), 5, 11, "got the string \"5\" (write numbers without quotes)"),
    InvalidManifest("size overflow", F.oneEntry(size: "9223372036854775808"), 5, 11,
                    "which is too large (the maximum is 9223372036854775807)"),
    InvalidManifest("size past 2^62", F.oneEntry(size: "9223372036854775807"), 5, 11,
                    "size must be at most 4611686018427387904 bytes (2^62, 4 EiB), got 9223372036854775807"),
    InvalidManifest("sizes adding past 2^62", F.oneEntry(size: "4611686018427387904", "  - path: b", "    size: 1", "    sha256: \(sha)"),
                    8, 11, "the sizes of the files add up to more than 4611686018427387904 bytes (2^62, 4 EiB) with this one"),
    InvalidManifest("hex size", F.oneEntry(size: "0x10"), 5, 11, "got \"0x10\""),
    InvalidManifest("size with underscores", F.oneEntry(size: "1_000"), 5, 11, "got \"1_000\""),
    InvalidManifest("size with leading zero", F.oneEntry(size: "010"), 5, 11, "no leading zeros"),
    InvalidManifest("size as a list", F.oneEntry(size: "[1]"), 5, 11, "got a list"),
    InvalidManifest("size tagged as string", F.oneEntry(size: "!!str 5"), 5, 11, "got the string \"5\""),

    // checksums
    InvalidManifest("sha256 too short", F.oneEntry(sha256: String(sha.dropLast())), 6, 13,
                    "sha256 must be 64 hex digits, found 63 characters"),
    InvalidManifest("sha256 not hex", F.oneEntry(sha256: "g" + sha.dropFirst()), 6, 13,
                    "sha256 must be 64 hex digits (0-9, a-f), found the non-hex character \"g\" at position 1"),
    InvalidManifest("sha256 not hex further on", F.oneEntry(sha256: String(sha.prefix(39)) + "x" + sha.dropFirst(40)), 6, 13,
                    "found the non-hex character \"x\" at position 40"),
    InvalidManifest("sha256 not hex at the end", F.oneEntry(sha256: String(sha.dropLast()) + "-"), 6, 13,
                    "found the non-hex character \"-\" at position 64"),
    InvalidManifest("sha512 wrong length", F.oneEntry("    sha512: \(sha)"), 7, 13,
                    "sha512 must be 128 hex digits, found 64 characters"),

    // mode
    InvalidManifest("mode 0755x", F.oneEntry("    mode: \"0755x\""), 7, 11,
                    "mode must be an octal string like \"0644\" (no setuid, setgid or sticky bits), got \"0755x\""),
    InvalidManifest("mode with setuid", F.oneEntry("    mode: \"4755\""), 7, 11, "got \"4755\""),
    InvalidManifest("mode without leading zero", F.oneEntry("    mode: 644"), 7, 11, "got \"644\""),
    InvalidManifest("mode with 8", F.oneEntry("    mode: \"0648\""), 7, 11, "got \"0648\""),

    // mtime
    InvalidManifest("mtime month 13", F.oneEntry("    mtime: 2026-13-01T00:00:00Z"), 7, 12,
                    "mtime \"2026-13-01T00:00:00Z\" has month 13"),
    InvalidManifest("mtime Feb 30", F.oneEntry("    mtime: 2026-02-30T00:00:00Z"), 7, 12,
                    "has day 30, but month 2 of 2026 has 28 days"),
    InvalidManifest("mtime Feb 29 of a common year", F.oneEntry("    mtime: 2100-02-29T00:00:00Z"), 7, 12,
                    "month 2 of 2100 has 28 days"),
    InvalidManifest("mtime without zone", F.oneEntry("    mtime: 2026-11-01T12:00:00"), 7, 12,
                    "it needs a time zone"),
    InvalidManifest("mtime hour 24", F.oneEntry("    mtime: 2026-11-01T24:00:00Z"), 7, 12, "has hour 24"),
    InvalidManifest("mtime 10 fraction digits", F.oneEntry("    mtime: 2026-11-01T12:00:00.1234567890Z"), 7, 12,
                    "at most 9"),

    // url
    InvalidManifest("ftp url", F.oneEntry("    url: ftp://files.example/a"), 7, 10,
                    "uses the scheme \"ftp\"; allowed schemes: https, http, file"),
    InvalidManifest("javascript url", F.oneEntry("    url: \"javascript:alert(1)\""), 7, 10,
                    "uses the scheme \"javascript\""),
    InvalidManifest("url with a space", F.oneEntry("    url: \"a b\""), 7, 10, "contains whitespace or a control character"),
    InvalidManifest("relative url without base_url", F.yaml("version: 1", "files:", "  - path: a", "    size: 1",
                                                            "    sha256: \(sha)"),
                    3, 5, "entry \"a\" has a relative url but the manifest has no base_url"),
    InvalidManifest("explicit relative url without base_url", F.yaml("version: 1", "files:", "  - path: a",
                                                                     "    url: x/a", "    size: 1", "    sha256: \(sha)"),
                    4, 10, "entry \"a\" has a relative url but the manifest has no base_url"),
]

@Test(arguments: invalidManifests)
func invalidManifestIsRejected(_ c: InvalidManifest) {
    guard let e = ManifestFixture.error(c.yaml) else {
        Issue.record("\(c.name): expected an error, but the manifest loaded")
        return
    }
    #expect(e.file == "m.yaml", "\(c.name)")
    #expect(e.line == c.line && e.column == c.column, "\(c.name): \(e)")
    #expect(e.message.contains(c.message), "\(c.name): \(e)")
}

@Test func invalidManifestTableIsLargeEnough() {
    #expect(invalidManifests.count >= 30)
}

@Test func invalidUTF8IsASyntaxErrorAtItsByte() {
    let bytes = Array("version: 1\nfiles: [a".utf8) + [0xff] + Array("]\n".utf8)
    let e = ManifestFixture.error(bytes: bytes)
    #expect(e?.line == 2 && e?.column == 10, "\(String(describing: e))")
    #expect(e?.message.contains("YAML syntax error: invalid leading UTF-8 octet") == true, "\(String(describing: e))")
}

@Test func errorDescriptionHasFileLineAndColumn() {
    let e = ManifestFixture.error(F.yaml("version: 2", "files: []"))
    #expect(e?.description == "m.yaml:1:10: unsupported manifest version 2: this mirror reads version 1")
    #expect(ManifestError(file: "x.yaml", message: "boom").description == "x.yaml: boom")
}


@Test func edgeCasesOfEmptiness() {
    let marker = ManifestFixture.error("---\n")
    #expect(marker?.message == "manifest is empty: expected a mapping with version and files", "\(String(describing: marker))")
    let gzEmpty = ManifestFixture.error(bytes: [0x1f, 0x8b])
    #expect(gzEmpty?.message.hasPrefix("not a valid gzip file") == true, "\(String(describing: gzEmpty))")
}

@Test func crlfLineEndingsKeepPositions() {
    let e = ManifestFixture.error("version: 1\r\nfiles:\r\n  - path: ../x\r\n")
    #expect(e?.line == 3 && e?.column == 11, "\(String(describing: e))")
}
