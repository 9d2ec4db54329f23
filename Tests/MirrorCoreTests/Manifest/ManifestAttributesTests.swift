import Foundation
import Testing
import MirrorFS
import MirrorTestSupport
@testable import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// `manifest create --mtime --mode` (``ManifestWriter/Options``): what it writes is what the
/// loader reads back, to the nanosecond and the permission bit, and what a manifest cannot hold
/// is said in a note.
@Suite struct ManifestAttributesTests {
    @Test func timesAreWrittenInUTCAndReadBackExactly() throws {
        let cases: [(FileTime, String)] = [
            (FileTime(seconds: 0), "1970-01-01T00:00:00Z"),
            (FileTime(seconds: -1), "1969-12-31T23:59:59Z"),
            (FileTime(seconds: 951_782_400), "2000-02-29T00:00:00Z"),
            (FileTime(seconds: 1_614_834_367, nanoseconds: 250_000_000), "2021-03-04T05:06:07.25Z"),
            (FileTime(seconds: 1_614_834_367, nanoseconds: 1), "2021-03-04T05:06:07.000000001Z"),
            (FileTime(seconds: 253_402_300_799, nanoseconds: 999_999_999), "9999-12-31T23:59:59.999999999Z"),
            (FileTime(seconds: -62_167_219_200), "0000-01-01T00:00:00Z"),
        ]
        for (time, text) in cases {
            #expect(RFC3339.format(time) == text)
            #expect(try RFC3339.parse(text).get() == time, "\(text)")
        }
        #expect(RFC3339.format(FileTime(seconds: 253_402_300_800)) == nil, "year 10000")
        #expect(RFC3339.format(FileTime(seconds: -62_167_219_201)) == nil, "year -1")
    }

    @Test func mtimeAndModeAreListedAndTheLoaderReadsThemBack() throws {
        let dir = try TemporaryDirectory()
        let root = dir.path("tree")
        try TestData.writeFile(at: root + "/a.bin", size: 100, seed: 1)
        try TestData.writeFile(at: root + "/s/tool", size: 10, seed: 2)
        var times = [timespec(tv_sec: 1_614_834_367, tv_nsec: 250_000_000), timespec(tv_sec: 1_614_834_367, tv_nsec: 250_000_000)]
        #expect(utimensat(AT_FDCWD, root + "/a.bin", &times, 0) == 0)
        #expect(chmod(root + "/a.bin", 0o640) == 0)
        #expect(chmod(root + "/s/tool", 0o4755) == 0)

        let plain = try ManifestWriter.create(directory: root, baseURL: "https://example.org/x/")
        #expect(!plain.yaml.contains("mtime") && !plain.yaml.contains("mode"), "only when asked: \(plain.yaml)")

        let result = try ManifestWriter.create(directory: root, baseURL: "https://example.org/x/",
                                               options: ManifestWriter.Options(mtime: true, mode: true))
        #expect(result.yaml.contains("    mtime: 2021-03-04T05:06:07.25Z\n    mode: \"0640\"\n"), "\(result.yaml)")
        let loaded = try ManifestLoader.parse(Array(result.yaml.utf8), sourceName: "created.yaml")
        let a = try #require(loaded.entries.first { $0.path == "a.bin" })
        #expect(a.mtime == FileTime(seconds: 1_614_834_367, nanoseconds: 250_000_000))
        #expect(a.mode == 0o640)
        let tool = try #require(loaded.entries.first { $0.path == "s/tool" })
        #expect(tool.mode == 0o755, "setuid is left out")
        #expect(tool.mtime != nil)
        #expect(result.notes == [ManifestWriter.Skipped(path: "s/tool", reason: "mode 4755 has setuid, setgid or sticky bits, "
                                                        + "which a manifest cannot carry; listed as 0755")])
        // The same tree, the same bytes.
        #expect(try ManifestWriter.create(directory: root, baseURL: "https://example.org/x/", threads: 1,
                                          options: ManifestWriter.Options(mtime: true, mode: true)).yaml == result.yaml)
    }

    /// `--chunks-dir`: the index goes to CDIR/PATH, nothing under DIR, and the entry still names
    /// `.mirror-chunks/PATH`; a CDIR inside DIR is not listed.
    @Test func chunkIndexesGoToTheirOwnFolder() throws {
        let dir = try TemporaryDirectory()
        let root = dir.path("tree")
        try TestData.writeFile(at: root + "/set/big.img", size: 2 << 20, seed: 3)
        for chunks in [dir.path("chunks"), root + "/idx", root + "/idx"] {
            let result = try ManifestWriter.create(directory: root, baseURL: "https://example.org/x/",
                                                   options: ManifestWriter.Options(chunksAbove: 1 << 20, chunksFolder: chunks))
            #expect(result.files.map(\.path) == ["set/big.img"], "\(chunks)")
            let reference = try #require(result.files.first?.chunks)
            #expect(reference.path == ".mirror-chunks/set/big.img")
            let bytes = try Data(contentsOf: URL(fileURLWithPath: chunks + "/set/big.img"))
            #expect(Int64(bytes.count) == reference.size)
            #expect(!FileManager.default.fileExists(atPath: root + "/.mirror-chunks"))
            #expect(result.chunkIndexes == 1)
        }
    }
}
