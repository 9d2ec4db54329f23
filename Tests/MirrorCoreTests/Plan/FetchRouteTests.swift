import Foundation
@testable import MirrorModel
import Testing
@testable import MirrorCore

/// What the dry run says of an entry fetched from zero (docs/cli.md, `--dry-run`): its line and
/// its totals by ``FetchRoute``, and which entry of one content leads (``ContentLeaders``, the
/// rule of the run's ``SyncRunner/holdDuplicates()``).
@Suite struct FetchRouteTests {
    /// An entry whose digests are those of the one byte `content` (the SHA-512 too with `sha512`).
    static func entry(_ path: String, size: Int64 = 100, content: UInt8 = 1, sha512: Bool = false) -> ManifestEntry {
        .fixture(path, size: size, sha256: Hasher.digest(.sha256, of: [content]),
                 sha512: sha512 ? Hasher.digest(.sha512, of: [content]) : nil)
    }

    @Test func theFirstEntryOfAContentLeadsAndLaterOnesWithTheSameDigestsFollowIt() {
        let entries = [Self.entry("a"), Self.entry("b", content: 2), Self.entry("c"), Self.entry("d", size: 200),
                       Self.entry("e", sha512: true), Self.entry("z1", size: 0), Self.entry("z2", size: 0), Self.entry("f")]
        var leaders = ContentLeaders()
        let found = entries.indices.map { leaders.leader(of: $0, in: entries) }
        // c and f have a's content; d another size; e another digest set; empty files never wait.
        #expect(found == [nil, nil, 0, nil, nil, nil, nil, 0], "\(found)")
    }

    @Test func eachRouteHasItsLine() {
        let e = Self.entry("images/lab.img", size: 16 << 20)
        #expect(DryRun.line(e, replacing: true, .whole(fetched: 16 << 20, noDelta: nil)) == "replace images/lab.img (16.0 MiB)")
        #expect(DryRun.line(e, replacing: false, .whole(fetched: 16 << 20, noDelta: nil)) == "download images/lab.img (16.0 MiB)")
        #expect(DryRun.line(e, replacing: true, .delta(from: "/d/images/lab.img", atItsPath: true, fetched: 300 << 10))
                == "replace images/lab.img (delta, ≈300.0 KiB of 16.0 MiB)")
        #expect(DryRun.line(e, replacing: false, .delta(from: "/usb/images/lab.img", atItsPath: false, fetched: 1 << 20))
                == "download images/lab.img (delta from /usb/images/lab.img, ≈1.0 MiB of 16.0 MiB)")
        #expect(DryRun.line(e, replacing: false, .copy(from: "/d/old/lab.img")) == "copy images/lab.img from /d/old/lab.img")
        #expect(DryRun.line(e, replacing: true, .whole(fetched: (16 << 20) + 900, noDelta: "chunk index http://h/x: HTTP 404"))
                == "replace images/lab.img (16.0 MiB; no delta: chunk index http://h/x: HTTP 404)")
    }

    /// The totals count what the run would receive: a copy nothing, a delta its ranges and
    /// index, a whole file with an index fetched on the way both.
    @Test func theTotalsCountWhatTheRunWouldReceive() {
        var totals = DryRunTotals()
        totals.add(.copy(from: "/d/a"))
        totals.add(.delta(from: "/d/b", atItsPath: true, fetched: 5000))
        totals.add(.whole(fetched: 1000, noDelta: nil))
        totals.add(.whole(fetched: 2000 + 300, noDelta: "its changed ranges and chunk index would be more than 80 % of the file"))
        #expect(totals.files == 3 && totals.deltas == 1 && totals.copies == 1 && totals.bytes == 8300)
        #expect(totals.line == "mirror: dry run: 3 files to download (8.1 KiB, 1 as a delta), 1 to copy, 0 to delete; nothing was changed")
        var plain = DryRunTotals()
        plain.add(.whole(fetched: 4000, noDelta: nil))
        #expect(plain.line == "mirror: dry run: 1 file to download (3.9 KiB), 0 to delete; nothing was changed")
    }

    /// A file that replaces one at its path is `replace` in its plan line, and in the totals too
    /// (they said `download` for both); a copy is a copy whatever was there.
    @Test func theTotalsSayReplaceAsThePlanLinesDo() {
        var totals = DryRunTotals()
        totals.add(.whole(fetched: 1000, noDelta: nil))
        totals.add(.whole(fetched: 1000, noDelta: nil), replacing: true)
        totals.add(.delta(from: "/d/b", atItsPath: true, fetched: 48), replacing: true)
        totals.add(.copy(from: "/d/a"), replacing: true)
        #expect(totals.files == 3 && totals.replacements == 2 && totals.copies == 1)
        #expect(totals.line == "mirror: dry run: 1 file to download and 2 to replace (2.0 KiB, 1 as a delta), 1 to copy, 0 to delete; nothing was changed")
        var replacing = DryRunTotals()
        replacing.add(.whole(fetched: 4000, noDelta: nil), replacing: true)
        #expect(replacing.line == "mirror: dry run: 1 file to replace (3.9 KiB), 0 to delete; nothing was changed")
    }

    /// `--json`'s `dry_run` gains `deltas` and `copies`; a document without them still decodes.
    @Test func theJSONTotalsAddFieldsAndOlderDocumentsStillDecode() throws {
        var totals = DryRunTotals()
        totals.add(.copy(from: "/d/a"))
        let json = try #require(String(data: try JSONEncoder().encode(totals), encoding: .utf8))
        for key in ["\"files\":0", "\"bytes\":0", "\"copies\":1", "\"deltas\":0", "\"checks\":0", "\"blocked\":0", "\"deletions\":0"] {
            #expect(json.contains(key), "\(json)")
        }
        let older = #"{"files":2,"bytes":4000,"checks":1,"blocked":0,"deletions":0}"#
        let decoded = try JSONDecoder().decode(DryRunTotals.self, from: Data(older.utf8))
        #expect(decoded.files == 2 && decoded.bytes == 4000 && decoded.checks == 1 && decoded.copies == 0 && decoded.deltas == 0)
    }
}
