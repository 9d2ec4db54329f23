import Foundation
@testable import MirrorModel
@testable import MirrorState
import Testing
@testable import MirrorCore
import MirrorTestSupport

/// `status` and `sync --dry-run` write their reports a piece at a time (docs/performance.md,
/// "Reports that stream"): the streamed text must be exactly what rendering the whole document
/// gives, across batch boundaries and with values that look like the spliced key.
@Suite struct StreamedReportTests {
    static let tricky = "\"entries\":[] \"plan\":[] \u{1B}[2J \u{202E} é \\"

    static func status(count: Int) -> DestinationStatus {
        var entries: [EntryStatus] = []
        for i in 0 ..< count {
            switch i % 5 {
            case 0: entries.append(EntryStatus(path: "m/\(i)", state: .missing, size: Int64(i)))
            case 1: entries.append(EntryStatus(path: "p/\(i) \(tricky)", state: .partial, size: 1000, partialBytes: Int64(i % 1000)))
            case 2: entries.append(EntryStatus(path: "f/\(i)", state: .failed, size: 7, error: "HTTP 500 at https://u:pw@h.example/\(i) \(tricky)", failedAt: 1_763_780_000))
            case 3: entries.append(EntryStatus(path: "d/\(i)", state: .done, size: 3))
            default: entries.append(EntryStatus(path: "b/\(i)", state: .blocked, size: 1, error: "a folder is in the way"))
            }
        }
        return DestinationStatus(destination: "/srv/\(tricky)", destinationExists: true, entries: entries,
                                 lastRun: RunRecord(start: 1_763_780_000, end: 1_763_780_966, result: "ok",
                                                    downloaded: 2, failed: 0, bytes: 1400),
                                 runningPid: nil, hasJournal: true)
    }

    static let counts = [0, 1, 2, JSONOutput.streamingBatch - 1, JSONOutput.streamingBatch, JSONOutput.streamingBatch + 1, 2 * JSONOutput.streamingBatch + 7]

    @Test(arguments: counts)
    func statusJSONStreamsTheSameDocument(count: Int) throws {
        let status = Self.status(count: count)
        let whole = JSONOutput.render(StatusDocument(status))
        #expect(status.json == whole)
        let decoded = try JSONOutput.makeDecoder().decode(StatusDocument.self, from: Data(status.json.utf8))
        #expect(decoded.entries.count == status.entries.count)
    }

    @Test(arguments: counts)
    func dryRunJSONStreamsTheSameDocument(count: Int) throws {
        var summary = SyncSummary()
        summary.total = count
        for i in 0 ..< count { summary.plan.append(i % 3 == 0 ? "download \(i) \(Self.tricky) (1 B)" : "check \(i)") }
        var totals = DryRunTotals()
        totals.files = count
        totals.bytes = Int64(count)
        summary.dryRun = totals
        let whole = JSONOutput.render(SyncDocument(summary))
        #expect(summary.json == whole)
        let decoded = try JSONOutput.makeDecoder().decode(SyncDocument.self, from: Data(summary.json.utf8))
        #expect((decoded.plan ?? []) == Array(summary.plan))
    }

    @Test func statusTextIsTheLinesOfItsWriter() {
        let status = Self.status(count: 40)
        var pieces: [String] = []
        status.writeText { pieces.append($0) }
        #expect(pieces.allSatisfy { $0.hasSuffix("\n") && $0.dropLast().firstIndex(of: "\n") == nil })
        #expect(pieces.joined() == status.text + "\n")
        // Every entry that is not done has its line (8 of each other state in 40).
        #expect(pieces.filter { $0.hasPrefix("missing     m/") }.count == 8)
    }

    /// The key is found among the top-level members only, never inside a string or a nested object.
    @Test func theSplicedArrayIsTheTopLevelOne() {
        let json = #"{"a":"\"entries\":[]","b":{"entries":[]},"c":"x\\","entries":[],"z":1}"#
        let at = JSONOutput.emptyArray("entries", in: json)
        let bytes = Array(json.utf8)
        #expect(at.map { String(decoding: bytes[..<$0], as: UTF8.self) } == #"{"a":"\"entries\":[]","b":{"entries":[]},"c":"x\\","entries":"#)
        #expect(JSONOutput.emptyArray("entries", in: #"{"a":"\"entries\":[]"}"#) == nil)
        #expect(JSONOutput.emptyArray("plan", in: #"{"plan":["x"]}"#) == nil)
    }

    @Test func lineListKeepsEveryLine() {
        let lines = ["", "a", "é/\u{301}", String(repeating: "x", count: 5000), "", "last"]
        var list = LineList()
        for line in lines { list.append(line) }
        #expect(Array(list) == lines)
        #expect(list.count == lines.count)
        #expect(LineList().isEmpty)
    }

    /// The manifest's digest is hashed a block at a time; a file of several blocks and a tail
    /// gives sha256sum's answer.
    @Test func theManifestDigestCoversEveryBlock() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("m.yaml")
        let expected = try TestData.writeFile(at: path, size: (5 << 19) + 3, seed: 11)
        let provenance = try #require(ManifestProvenance.ofFile(path))
        #expect(provenance.sha256 == expected)
    }
}

/// An element that cannot be encoded (none of the report types can fail today): the line stays
/// one JSON document, with every other element in place and that one naming the failure.
@Suite struct StreamedReportFailureTests {
    struct Picky: Encodable {
        let value: Int
        struct Refused: Error {}
        func encode(to encoder: any Encoder) throws {
            if value == 1 { throw Refused() }
            var container = encoder.singleValueContainer()
            try container.encode(value)
        }
    }

    struct Document: Encodable { let items: [Int]; let z: Int }

    @Test func aFailingElementLeavesValidJSON() throws {
        let count = JSONOutput.streamingBatch + 3
        var pieces: [String] = []
        JSONOutput.write(Document(items: [], z: 7), array: "items", count: count, element: { Picky(value: $0) }) { pieces.append($0) }
        let object = try #require(try JSONSerialization.jsonObject(with: Data(pieces.joined().utf8)) as? [String: Any])
        let items = try #require(object["items"] as? [Any])
        #expect(items.count == count)
        #expect(items[0] as? Int == 0 && items[2] as? Int == 2 && items[count - 1] as? Int == count - 1)
        #expect(((items[1] as? [String: Any])?["error"] as? String)?.hasPrefix("cannot encode this element") == true)
        #expect(object["z"] as? Int == 7)
    }
}
